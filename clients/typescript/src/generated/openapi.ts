// Generated from Switchboard's /openapi.json by scripts/generate-api-types.mjs (openapi-typescript).
// Do not edit: run `npm run generate -- <server url>` after an API change.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The process is up. */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The process can serve: its lease on its calls holds by its own clock, and its database
         *     answers within a second. A node cut off from its database says so within a second of its
         *     lease running out, however the database fails to answer (refused or silent).
         */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_agents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get: operations["get_agent"];
        put: operations["put_agent"];
        post?: never;
        delete: operations["delete_agent"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/{name}/connections/{toolkit}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
                toolkit: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["start_connection"];
        delete: operations["delete_connection"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/{name}/toolset": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get: operations["get_toolset"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/alerts/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["history"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/alerts/rules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_rules"];
        put?: never;
        post: operations["create_rule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/alerts/rules/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get: operations["get_rule"];
        put?: never;
        post?: never;
        delete: operations["delete_rule"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_keys"];
        put?: never;
        post: operations["create_key"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api-keys/{key_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                key_id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        delete: operations["revoke_key"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/calls": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant's calls, newest first, a page at a time, searched by any of the keys. */
        get: operations["list_calls"];
        put?: never;
        post: operations["create_call"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/calls/{call_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        get: operations["get_call"];
        put?: never;
        post?: never;
        delete: operations["end_call"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/calls/{call_id}/invocations": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        get: operations["list_invocations"];
        put?: never;
        post: operations["invoke"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/calls/{call_id}/responses/{response_id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
                response_id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["cancel_response"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/connections": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_connections"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/features": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["get_features"];
        put: operations["put_features"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/mcp-servers": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_mcp_servers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/mcp-servers/{label}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        get: operations["get_mcp_server"];
        put: operations["put_mcp_server"];
        post?: never;
        delete: operations["delete_mcp_server"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/mcp-servers/{label}/tools": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        get: operations["list_mcp_server_tools"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/memory/callers/{caller}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["get_caller_memory"];
        put?: never;
        post?: never;
        delete: operations["delete_caller_memory"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/oauth/callback": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["oauth_callback"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/phone_numbers/{number}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                number: string;
            };
            cookie?: never;
        };
        get?: never;
        /** @description Sets which agent and which OpenAI API (`realtime` or `live`) answer one called number (E.164, as in the SIP To header), keeping every other phone setting. Takes effect for the next call to the number. */
        put: operations["put_number"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/realtime/webhook/{tenant_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** @description Where OpenAI posts `realtime.call.incoming`, `live.transport.incoming` and the deprecated `live.call.incoming` for this tenant (set it as the project's webhook URL). Verified with the tenant secret `openai_webhook_secret` (Standard Webhooks); answered at once, the call is accepted in the background by the API the tenant's phone settings name for the number called (an event of the other API is acknowledged and ignored); a repeated `webhook-id` is acknowledged and ignored. */
        post: operations["webhook_route"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_secrets"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/secrets/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get?: never;
        put: operations["put_secret"];
        post?: never;
        delete: operations["delete_secret"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tenants": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_tenants"];
        put?: never;
        post: operations["create_tenant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tenants/{tenant_id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        get: operations["get_tenant"];
        put?: never;
        post?: never;
        delete: operations["delete_tenant"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tenants/{tenant_id}/api-keys": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["create_tenant_key"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/toolkits": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_toolkits"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/toolkits/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get: operations["get_toolkit"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["list_tools"];
        put?: never;
        post: operations["create_tool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools:validate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["validate_tool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["get_tool"];
        put: operations["put_tool"];
        post?: never;
        delete: operations["delete_tool"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}:replay": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["replay_tool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}:rollback": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["rollback_tool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}:test": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["test_tool"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}/versions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        get: operations["list_versions"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/tools/{name}/versions/{version}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["get_version"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description An agent as written. */
        AgentBody: {
            /** @description The tenant's default agent (for calls that name none). */
            default?: boolean;
            /**
             * @description What the caller hears while a slow tool without `messages.delayed` runs (at most 200
             *     characters), e.g. "One moment, please." Said once the turn budget passes in silence, at
             *     once for a tool expected to take longer; absent: silence.
             */
            filler?: string | null;
            guards?: components["schemas"]["Guards"] | null;
            /** @description Agents this one may hand the call to. */
            handoffs?: string[];
            instructions?: string;
            /**
             * @description GPT-Live settings: `model`, `voice_instructions` (the voice model's; `instructions`
             *     are the backend model's), `backend_model`, `voice`. Realtime calls ignore them.
             */
            live?: Record<string, unknown> | null;
            model?: string | null;
            /** @description Optional; must match the URL when given. */
            name?: string | null;
            tools?: components["schemas"]["AgentToolBody"][];
            /**
             * Format: int32
             * @description The longest silence the caller should hear while a tool runs, in milliseconds (200 to
             *     5,000; default 700): a slow tool gets a new filler each time this much silence passes.
             */
            turn_budget_ms?: number | null;
            voice?: string | null;
        };
        /** @description One tool of an agent. */
        AgentToolBody: {
            /**
             * @description For a toolkit (`toolkit:<name>`): the actions to enable, each one function for the
             *     model; absent enables them all.
             */
            actions?: string[] | null;
            /** @description The `config` scope of the tool's templates. */
            config?: Record<string, unknown> | null;
            enabled?: boolean;
            /**
             * @description The `secrets` scope: sealed at rest, never returned. Absent keeps the stored value;
             *     `null` clears it.
             */
            sensitive_config?: Record<string, unknown> | null;
            tool: string;
        };
        /** @description One tool of an agent, as stored. */
        AgentToolView: {
            /** @description For a toolkit: the actions enabled (absent: all). */
            actions?: string[] | null;
            config: Record<string, unknown>;
            enabled: boolean;
            sensitive_config_set: boolean;
            tool: string;
        };
        /** @description An agent as stored: sensitive config shows only whether it is set. */
        AgentView: {
            created_at: string;
            default: boolean;
            /** @description What the caller hears while a slow tool without `messages.delayed` runs; absent: silence. */
            filler?: string | null;
            guards?: components["schemas"]["Guards"] | null;
            handoffs: string[];
            instructions: string;
            live?: Record<string, unknown> | null;
            model?: string | null;
            name: string;
            tools: components["schemas"]["AgentToolView"][];
            /**
             * Format: int32
             * @description The agent's turn budget in milliseconds; absent when it keeps the default (700).
             */
            turn_budget_ms?: number | null;
            updated_at: string;
            voice?: string | null;
        };
        /** @description One notification of a transition. */
        AlertDeliveryView: {
            /** Format: int64 */
            attempts: number;
            /** @description `webhook` or `email`. */
            channel: string;
            delivered_at?: string | null;
            /** @description `pending`, `delivered` or `failed`. */
            delivery: string;
            /**
             * @description Why the last attempt failed (a status or what the server answered; never a URL or a
             *     password).
             */
            last_error?: string | null;
        };
        /**
         * @description A rule's email channel: the addresses, and the SMTP server they are sent through (held to
         *     the `api_call` outbound rules: no loopback or private server unless the deployment allows
         *     private networks).
         */
        AlertEmailBody: {
            /** @description The address alerts are sent from. */
            from_email: string;
            /** @description The SMTP password: write-only, stored sealed, never shown. */
            password?: string | null;
            /**
             * @description `starttls` (default), `tls` (implicit TLS) or `plain` (only where private networks are
             *     allowed).
             */
            security?: string | null;
            /** @description The SMTP server's name or IP address. */
            smtp_host: string;
            /**
             * Format: int32
             * @description Default 587.
             */
            smtp_port?: number | null;
            /** @description 1-10 addresses (`name@example.com`). */
            to: string[];
            /** @description The SMTP user name, if the server asks for one. */
            username?: string | null;
        };
        /** @description One transition of a rule and its notifications. */
        AlertEventView: {
            at: string;
            /**
             * Format: int64
             * @description Attempts over all its notifications.
             */
            attempts: number;
            /** @description When the last notification was delivered, once all were. */
            delivered_at?: string | null;
            /** @description Each notification: one per channel of the rule. */
            deliveries: components["schemas"]["AlertDeliveryView"][];
            /**
             * @description All its notifications together: `pending` while one is, else `failed` if one failed,
             *     else `delivered`.
             */
            delivery: string;
            /** @description The figures the rule compared. */
            detail: Record<string, unknown>;
            /** @description The first failing notification's last error. */
            last_error?: string | null;
            rule: string;
            /** Format: int64 */
            seq: number;
            /** @description `firing` or `resolved`. */
            state: string;
        };
        /** @description A tenant's alert history, newest first. */
        AlertHistory: {
            items: components["schemas"]["AlertEventView"][];
        };
        /**
         * @description The OpenAPI shape of a rule (checked by `alerts::rules::parse`, which names each
         *     problem's JSON Pointer).
         */
        AlertRuleBody: {
            /**
             * Format: int32
             * @description Fires when the p95 latency is over this, in ms (`tool_latency_p95`; required).
             */
            above_ms?: number | null;
            /**
             * Format: int32
             * @description Fires when more than this percentage of calls failed (`tool_failure_rate`; 0-99, default 20).
             */
            above_percent?: number | null;
            /** @description One agent's connection (`connection_broken`); absent: any. */
            agent?: string | null;
            /**
             * Format: int32
             * @description Fires at this percentage of the live-call cap (`live_call_cap`; 1-100, default 100).
             */
            at_percent?: number | null;
            email?: components["schemas"]["AlertEmailBody"] | null;
            /** @description The rule's name: 1-64 letters, digits, `_` or `-`. */
            id: string;
            /** @description `tool_failure_rate`, `tool_latency_p95`, `breaker_open`, `connection_broken` or `live_call_cap`. */
            kind: string;
            /**
             * Format: int32
             * @description Calls in the window needed before the rule fires (default 10).
             */
            min_calls?: number | null;
            /** @description The tool (`tool_failure_rate`, `tool_latency_p95`). */
            tool?: string | null;
            /** @description One breaker (`host:port` of an `api_call`, `mcp:<label>` of an MCP server); absent: any. */
            upstream?: string | null;
            /**
             * @description Where the signed notifications go (the `api_call` outbound rules apply). A rule has
             *     `webhook_url`, `email` or both.
             */
            webhook_url?: string | null;
            /**
             * Format: int32
             * @description The window in seconds (tool rules: 60-86400, default 300; `breaker_open`: 10-86400, default 60).
             */
            window_s?: number | null;
        };
        /** @description A tenant's rules. */
        AlertRuleList: {
            items: components["schemas"]["AlertRuleView"][];
        };
        /** @description A rule as stored: its definition with every default, and its state. */
        AlertRuleView: {
            changed_at?: string | null;
            created_at: string;
            /**
             * @description The checked definition (kind, fields with defaults, `webhook_url` and/or `email`, never
             *     the SMTP password).
             */
            definition: Record<string, unknown>;
            id: string;
            /** @description `ok` or `firing`. */
            state: string;
            /**
             * Format: int64
             * @description Changes of state so far.
             */
            transitions: number;
        };
        /** @description What deleting a caller's memory removed (all zero when nothing was remembered). */
        CallerForgotten: {
            caller: string;
            /** Format: int64 */
            entities: number;
            /** Format: int64 */
            observations: number;
            /** Format: int64 */
            relations: number;
        };
        /** @description Everything remembered about one caller (bounded by the server's per-caller limits). */
        CallerMemoryView: {
            /** @description The caller's number (`call.from`) or `user.id`. */
            caller: string;
            /** @description RFC 3339. */
            created_at: string;
            entities: string[];
            /** @description Oldest first. */
            observations: components["schemas"]["ObservationView"][];
            relations: components["schemas"]["RelationView"][];
            /** @description RFC 3339. */
            updated_at: string;
        };
        /** @description A page of calls, newest first, and the cursors beside it. */
        CallList: {
            items: components["schemas"]["CallListItem"][];
            /** @description Pass as `after` for older calls; absent on the last page. */
            next?: string | null;
            /** @description Pass as `before` for newer calls; absent on the newest page. */
            previous?: string | null;
        };
        /** @description One call as the list shows it, every string redacted of the tenant's secrets. */
        CallListItem: {
            /** @description The active agent. */
            agent: string;
            call_id: string;
            ended_at?: string | null;
            /** @description Whether one of its invocations failed. */
            failed: boolean;
            from?: string | null;
            /** @description RFC 3339 (UTC, milliseconds). */
            started_at: string;
            /** @description `active` or `ended`. */
            status: string;
            to?: string | null;
            /** @description The `user.id` the call started with. */
            user_id?: string | null;
        };
        /** @description A started call and the toolset its first agent's model should get. */
        CallStarted: {
            agent: string;
            call_id: string;
            /**
             * @description What the agent remembers about this caller (its `memory` toolkit with `load_profile`):
             *     `{text, facts: [{entity, content, created_at}]}`. Add `text` to the model's
             *     instructions; tools read it at `workflow.caller_profile`. Absent for a new caller.
             */
            caller_profile?: Record<string, unknown> | null;
            /** @description `{tools, tool_choice}` in OpenAI Realtime format. */
            toolset: Record<string, unknown>;
        };
        /** @description A call, its context and its invocation record. */
        CallView: {
            agent: string;
            call_id: string;
            /**
             * @description The call's context; the call's secrets and the user's tokens are redacted wherever they
             *     appear.
             */
            context: Record<string, unknown>;
            /**
             * @description The newest invocation records (at most the server's `max_records_per_call`), oldest
             *     first; each record's `arguments`, `output` and logs are bounded too. Every record, a
             *     page at a time: `GET /v1/calls/{call_id}/invocations`.
             */
            invocations: Record<string, unknown>[];
            /**
             * Format: int64
             * @description How many invocations the call has recorded in all (more than `invocations` holds
             *     when older ones were left out).
             */
            invocations_total: number;
            live_on_this_node: boolean;
            status: string;
        };
        /** @description A tenant's connections. */
        ConnectionList: {
            items: components["schemas"]["ConnectionView"][];
        };
        /** @description One connection; never its tokens. */
        ConnectionView: {
            agent: string;
            created_at: string;
            /** @description Why it broke. */
            error?: string | null;
            /**
             * @description `connected`, or `broken`: the provider refused to renew the access (revoked or
             *     expired); connect again. A broken connection answers the model "calendar not connected".
             */
            status: string;
            toolkit: string;
            updated_at: string;
        };
        /** @description Where to connect an agent's toolkit. */
        ConnectStart: {
            /**
             * @description The console page that connects this agent: open it in a browser, sign in with one of
             *     the tenant's keys, and continue to the provider's consent. The connection completes
             *     only in that browser.
             */
            connect_url: string;
            /** @description What to do, in words. */
            message: string;
        };
        /** @description A rule just made, with its webhook secret (shown this once). */
        CreatedAlertRule: components["schemas"]["AlertRuleView"] & {
            /**
             * @description The Standard Webhooks secret (`whsec_…`) its notifications are signed with; it is not
             *     shown again.
             */
            secret: string;
        };
        /** @description A new key: `key` is shown this once and never again. */
        CreatedKey: components["schemas"]["KeyView"] & {
            key: string;
        };
        /** @description Every error response: `{"error": {...}}`. */
        ErrorBody: {
            error: components["schemas"]["ErrorDetail"];
        };
        /** @description The body of every error response. */
        ErrorDetail: {
            /** @description Stable, machine-readable: `not_found`, `invalid_request`, `unauthorized`, … */
            code: string;
            details?: components["schemas"]["ErrorDetails"] | null;
            message: string;
        };
        /**
         * @description What `details` holds, for the document: every problem of a definition, or facts about the
         *     error (e.g. `retry_after_s`).
         */
        ErrorDetails: components["schemas"]["Problem"][] | {
            [key: string]: unknown;
        };
        /** @description An agent's runaway guards; every field is optional and defaults as shown. */
        Guards: {
            /**
             * Format: int32
             * @description Function calls of any tool in any 60 seconds of a call (default 60).
             */
            calls_per_minute?: number | null;
            identical_calls?: components["schemas"]["IdenticalCalls"] | null;
        };
        /** @description The same tool with the same arguments at most `max` times within `window_s`. */
        IdenticalCalls: {
            /**
             * Format: int32
             * @description Default 5.
             */
            max?: number | null;
            /**
             * Format: int32
             * @description Default 60.
             */
            window_s?: number | null;
        };
        /** @description A page of a call's invocation records, oldest first, and where it stands in the call. */
        InvocationList: {
            /**
             * Format: int64
             * @description How many records come before this page.
             */
            before: number;
            /** @description The records as the call's view shows them (redacted, without replay traces). */
            items: Record<string, unknown>[];
            /**
             * @description Whether the call had records after this page when it was read (read on while it is
             *     true).
             */
            more: boolean;
            /**
             * @description Pass as `after` for the records after this page. Given on every page that holds a
             *     record, also the one ending at the call's newest, so a live call's later records can be
             *     asked for with it.
             */
            next?: string | null;
            /** @description Pass as `before` for the earlier records; absent when the page starts at the call's first. */
            previous?: string | null;
            /**
             * Format: int64
             * @description How many records the call has in all.
             */
            total: number;
        };
        /** @description The answer to a function call. */
        InvocationResult: {
            /** @description Transfers and hang-ups for your stack to carry out. */
            actions: Record<string, unknown>[];
            duplicate_of?: string | null;
            /**
             * @description Why it failed: `tool_not_found`, `tool_disabled`, `tool_args_parse_error`,
             *     `invalid_arguments`, `validation_failed`, `api_call_failed`, `upstream_unavailable`,
             *     `timeout`, `cancelled`, `call_transfer_failed`, `handoff_failed`, `rate_limited`,
             *     `tool_execution_failed`, `loop_detected` (a runaway guard: the same call too often, or
             *     too many calls a minute), `already_done` (a transfer or hang-up already ran), or a
             *     calendar's: `slot_taken` (with free `alternatives` in `details`), `outside_hours`
             *     (also `check_availability`'s answer for a time outside the booking rules),
             *     `calendar_unavailable`, `not_connected`, `invalid_attendee`, `not_found`,
             *     `too_late_to_change` (a booking too close to its start to cancel or move).
             */
            error?: string | null;
            function_call_id: string;
            /**
             * @description Set when the call moved to another agent: update the model with this toolset and the
             *     agent's instructions.
             */
            handoff?: Record<string, unknown> | null;
            /** @description The response was interrupted: do not ask the model for a new response for this answer. */
            interrupted: boolean;
            /**
             * @description The answer as the item that goes back to the model (`function_call_output`, a `tool`
             *     message or a `tool_result` block), when the request gave an `item` or `answer_as`.
             */
            item?: Record<string, unknown> | null;
            ok: boolean;
            /** @description The JSON text to give the model as the function call's output. */
            output: string;
            /** @description This answer was recorded earlier (a repeated request). */
            replayed: boolean;
            /** @description `output`, parsed. */
            result: Record<string, unknown>;
        };
        /**
         * @description Whose shape an answer item takes.
         * @enum {string}
         */
        ItemFormat: "openai-responses" | "openai-chat" | "anthropic";
        /** @description An API key as listed: never the key itself. */
        KeyView: {
            created_at: string;
            id: string;
            label: string;
            /** @description The key's first characters, to tell keys apart. */
            prefix: string;
            revoked_at?: string | null;
        };
        /**
         * @description An MCP server to register: `url` (streamable HTTP) or `command` (stdio, where the operator
         *     allows it).
         */
        McpServerBody: {
            args?: string[];
            /** @description A program speaking MCP over stdio (needs `serve --allow-mcp-stdio`). */
            command?: string | null;
            /** @description Environment variables of the stdio program. Sealed; only names are shown. */
            env?: {
                [key: string]: string;
            };
            /** @description Headers sent with every request (e.g. `Authorization`). Sealed; only names are shown. */
            headers?: {
                [key: string]: string;
            };
            /** @description The streamable HTTP endpoint, e.g. `https://mcp.example.com/mcp`. Sealed at rest. */
            url?: string | null;
        };
        /** @description A registered MCP server: never its URL path, headers' values or environment values. */
        McpServerView: {
            created_at: string;
            /** @description Scheme, host and port (http), or the program (stdio). */
            endpoint: string;
            /** @description The names of its headers (http) or environment variables (stdio). */
            header_names: string[];
            label: string;
            /** Format: int64 */
            revision: number;
            /** @description The names of its tools as last listed; attach one to an agent as `"<label>/<name>"`. */
            tools?: string[] | null;
            /** @description Why listing its tools failed just now (on PUT), if it did. */
            tools_error?: string | null;
            tools_listed_at?: string | null;
            /** @description `http` or `stdio`. */
            transport: string;
            updated_at: string;
        };
        /** @description The tools of an MCP server. */
        McpToolList: {
            server: string;
            tools: components["schemas"]["McpToolView"][];
        };
        /** @description One tool of an MCP server. */
        McpToolView: {
            /** @description What to write in an agent's `tools` to attach it. */
            attach_as: string;
            description?: string | null;
            /** @description Its arguments (JSON Schema), as the model will see them. */
            input_schema: Record<string, unknown>;
            name: string;
            /** @description The server says the tool changes nothing (`readOnlyHint`): it is a `read` tool. */
            read_only: boolean;
            title?: string | null;
        };
        /** @description A call to start. */
        NewCall: {
            /** @description The agent to start with; the tenant's default agent when absent. */
            agent?: string | null;
            /** @description Your id for the call (unique within your tenant); one is made when absent. */
            call_id?: string | null;
            /** @description Caller and callee numbers (`call.from`, `call.to`). */
            from?: string | null;
            to?: string | null;
            /** @description The `user` scope: who is calling, tokens for your APIs (never shown back). */
            user?: Record<string, unknown> | null;
        };
        /** @description A function call from the model: its id, name and arguments, or the model's item as it came. */
        NewInvocation: {
            answer_as?: components["schemas"]["ItemFormat"] | null;
            /**
             * @description The arguments: an object, or the JSON text the model produced (as OpenAI's events carry
             *     it), parsed like `arguments_json` (other JSON, an array or a number, is answered
             *     `tool_args_parse_error`, as that text would be)…
             */
            arguments?: unknown;
            /** @description …or the JSON text the model produced. */
            arguments_json?: string | null;
            /**
             * @description The model's id for this function call; repeats are answered with the first answer.
             *     Required unless `item` is given.
             */
            function_call_id?: string | null;
            /**
             * @description Instead of the fields above: the model's function call as it came, an OpenAI Responses
             *     `function_call` item, a Chat Completions tool call or an Anthropic `tool_use` block. The
             *     answer then carries `item` in the matching shape.
             */
            item?: Record<string, unknown> | null;
            /** @description The function's name; required unless `item` is given. */
            name?: string | null;
            /** @description The model response it belongs to (for cancellation on barge-in). */
            response_id?: string | null;
        };
        /** @description A key to create. */
        NewKey: {
            /** @description What the key is for. */
            label?: string | null;
        };
        /** @description A tenant to create. */
        NewTenant: {
            /** @description Feature configuration, e.g. `{"refer": {...}}` for call transfer. */
            features?: Record<string, unknown> | null;
            /** @description Lowercase letters, digits and `-` (e.g. `acme-corp`). */
            id: string;
            name?: string | null;
        };
        /** @description The body of `PUT /v1/phone_numbers/{number}`. */
        NumberSetting: {
            /** @description The agent that answers the number; left out: the tenant's default agent. */
            agent?: string | null;
            /** @description `realtime` or `live`; left out: the tenant's `features.realtime.api`. */
            api?: string | null;
        };
        /** @description One remembered fact. */
        ObservationView: {
            /** @description The call it was remembered in. */
            call_id?: string | null;
            content: string;
            /** @description RFC 3339. */
            created_at: string;
            /** @description Who or what it is about (`caller`, `Max`, …). */
            entity: string;
            /** Format: int64 */
            id: number;
        };
        /** @description A page of items and the cursor of the next page. */
        PageOf_AgentView: {
            items: {
                created_at: string;
                default: boolean;
                /** @description What the caller hears while a slow tool without `messages.delayed` runs; absent: silence. */
                filler?: string | null;
                guards?: components["schemas"]["Guards"] | null;
                handoffs: string[];
                instructions: string;
                live?: Record<string, unknown> | null;
                model?: string | null;
                name: string;
                tools: components["schemas"]["AgentToolView"][];
                /**
                 * Format: int32
                 * @description The agent's turn budget in milliseconds; absent when it keeps the default (700).
                 */
                turn_budget_ms?: number | null;
                updated_at: string;
                voice?: string | null;
            }[];
            /** @description Pass as `after` for the next page; absent on the last. */
            next?: string | null;
        };
        /** @description A page of items and the cursor of the next page. */
        PageOf_McpServerView: {
            items: {
                created_at: string;
                /** @description Scheme, host and port (http), or the program (stdio). */
                endpoint: string;
                /** @description The names of its headers (http) or environment variables (stdio). */
                header_names: string[];
                label: string;
                /** Format: int64 */
                revision: number;
                /** @description The names of its tools as last listed; attach one to an agent as `"<label>/<name>"`. */
                tools?: string[] | null;
                /** @description Why listing its tools failed just now (on PUT), if it did. */
                tools_error?: string | null;
                tools_listed_at?: string | null;
                /** @description `http` or `stdio`. */
                transport: string;
                updated_at: string;
            }[];
            /** @description Pass as `after` for the next page; absent on the last. */
            next?: string | null;
        };
        /** @description A page of items and the cursor of the next page. */
        PageOf_TenantView: {
            items: {
                created_at: string;
                features: Record<string, unknown>;
                id: string;
                name: string;
                updated_at: string;
            }[];
            /** @description Pass as `after` for the next page; absent on the last. */
            next?: string | null;
        };
        /** @description A page of items and the cursor of the next page. */
        PageOf_ToolView: {
            items: {
                created_at: string;
                /** @description The definition as given. */
                definition: Record<string, unknown>;
                name: string;
                /**
                 * @description Why this version was published (`?note=` when it was put; `rollback to vN` for a
                 *     rollback without a note); absent when none was given.
                 */
                note?: string | null;
                /**
                 * @description Who published it: `key <api key id>` for the API, `console (key <api key id>)` for the
                 *     console; absent for versions published before this was kept.
                 */
                published_by?: string | null;
                /** Format: int64 */
                version: number;
            }[];
            /** @description Pass as `after` for the next page; absent on the last. */
            next?: string | null;
        };
        /**
         * @description One problem: where it is (a JSON Pointer, `""` for the whole document), what is wrong, and
         *     how to fix it.
         */
        Problem: {
            fix?: string | null;
            message: string;
            pointer: string;
        };
        /** @description A link between two entities: `from` `relation` `to`. */
        RelationView: {
            from: string;
            relation: string;
            to: string;
        };
        /** @description What a replay found. */
        ReplayReport: {
            /** @description The calls replayed (each call's id once, in the order of `invocations`). */
            calls: string[];
            /**
             * @description Per invocation, newest first (by call, in call order, when calls were named): the
             *     verdict, the output recorded and now, the context writes, and each effect (`recorded`:
             *     its recorded outcome was reused; `diverged`: the recording has no such request, so it
             *     was answered with a failure).
             */
            invocations: Record<string, unknown>[];
            /** @description How many invocations are unchanged, changed, newly failing, newly passing, skipped. */
            summary: Record<string, unknown>;
            tool: string;
            /** @description True when the selection held more invocations than `last`: the oldest were left out. */
            truncated: boolean;
            /**
             * Format: int64
             * @description The stored version replayed; absent for a draft.
             */
            version?: number | null;
        };
        /** @description What to replay, and against what. */
        ReplayRun: {
            /** @description Replay the tool's invocations in these calls (by call id) instead of the newest ones. */
            calls?: string[] | null;
            /** @description A draft definition of the tool (not saved). Absent: `version`, else the current version. */
            definition?: Record<string, unknown> | null;
            /**
             * Format: int32
             * @description How many of the tool's newest recorded invocations to replay (default 50).
             */
            last?: number | null;
            /**
             * Format: int32
             * @description Replay every invocation of the tool in its newest this many calls (1 to 50), up to
             *     `last` invocations in all (default 200 here), instead of the newest invocations.
             */
            last_calls?: number | null;
            /**
             * Format: int64
             * @description A stored version to replay against, instead of a draft.
             */
            version?: number | null;
        };
        /** @description The version to return to. */
        RollbackRun: {
            /** @description The new version's change note (at most 500 characters; default `rollback to vN`). */
            note?: string | null;
            /**
             * Format: int64
             * @description An earlier version, as `GET /v1/tools/{name}/versions` lists them.
             */
            version: number;
        };
        /** @description A secret value to set. */
        SecretValue: {
            value: string;
        };
        /** @description A secret's name and when it was set; never its value. */
        SecretView: {
            name: string;
            updated_at: string;
        };
        /** @description A tenant. */
        TenantView: {
            created_at: string;
            features: Record<string, unknown>;
            id: string;
            name: string;
            updated_at: string;
        };
        /** @description What a test run did. */
        TestResult: {
            /** @description The effects the run asked for, in order. */
            effects: Record<string, unknown>[];
            handoff?: Record<string, unknown> | null;
            logs: Record<string, unknown>[];
            /** @description The JSON the model would receive. */
            output: Record<string, unknown>;
            /** @description The context writes it would commit. */
            writes: Record<string, unknown>[];
        };
        /** @description A test run of a tool. */
        TestRun: {
            /** @description The call's state: `{"user": {...}, "workflow": {...}, "agents": {...}, "flags": {...}}`. */
            context?: Record<string, unknown> | null;
            /**
             * @description `stub` (default): effects are listed and answered with a stub (HTTP 200 `{}`);
             *     `perform`: effects are performed for real.
             */
            effects?: string | null;
            /**
             * @description Outcomes for the run's effects, in order, with `effects: stub`: the first effect gets
             *     the first mock, and so on; effects past the list get the stub. Each is an effect outcome:
             *     `{"kind": "http", "status": 503, "body": {...}}`, `{"kind": "failed", "code": "timeout",
             *     "message": "..."}` or `{"kind": "done", "value": ...}`.
             */
            mocks?: Record<string, unknown>[] | null;
            /** @description The arguments, as the model would send them. */
            params?: Record<string, unknown>;
            /**
             * Format: int64
             * @description Test a given version instead of the current one.
             */
            version?: number | null;
        };
        /** @description One action of a toolkit. */
        ToolkitActionView: {
            description: string;
            /** @description The function's name. */
            name: string;
            /**
             * @description Typed parameters: `name`, `type`, `description`, `required`, `default`, `enum`,
             *     `min_value`, `max_value`, `items`.
             */
            parameters: Record<string, unknown>[];
            returns: string;
        };
        /** @description The catalogue. */
        ToolkitList: {
            items: components["schemas"]["ToolkitView"][];
        };
        /** @description One built-in toolkit. */
        ToolkitView: {
            /** @description Each action is one function for the model, named after the action. */
            actions: components["schemas"]["ToolkitActionView"][];
            /** @description What the authentication needs (provider, scopes, endpoints); never a secret. */
            auth_config?: Record<string, unknown> | null;
            /** @description `basic` or `oauth2`. */
            auth_type?: string | null;
            /** @description JSON Schema of the agent tool's `config`, checked when the agent is saved. */
            config_schema: Record<string, unknown>;
            description: string;
            /** @description Enable it on an agent as `{"tool": "toolkit:<name>"}`. */
            name: string;
            requires_auth: boolean;
            /** @description JSON Schema of the write-only `sensitive_config`. */
            sensitive_config_schema: Record<string, unknown>;
        };
        /** @description One version of a tool. */
        ToolView: {
            created_at: string;
            /** @description The definition as given. */
            definition: Record<string, unknown>;
            name: string;
            /**
             * @description Why this version was published (`?note=` when it was put; `rollback to vN` for a
             *     rollback without a note); absent when none was given.
             */
            note?: string | null;
            /**
             * @description Who published it: `key <api key id>` for the API, `console (key <api key id>)` for the
             *     console; absent for versions published before this was kept.
             */
            published_by?: string | null;
            /** Format: int64 */
            version: number;
        };
        /** @description The result of validating a definition. */
        Validation: {
            /** @description The function a model would see (when valid). */
            function?: Record<string, unknown> | null;
            ok: boolean;
            /** @description Every problem: `{pointer, message, fix}`. */
            problems: Record<string, unknown>[];
            side_effect?: string | null;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Up */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description The database does not answer, or this node's lease on its calls has run out */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
        };
    };
    list_agents: {
        parameters: {
            query?: {
                /** @description The `next` cursor of the previous page; absent or empty: from the start. */
                after?: string;
                /** @description Items per page, 1 to 200 (default 50). */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PageOf_AgentView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_agent: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_agent: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AgentBody"];
            };
        };
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AgentView"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_agent: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    start_connection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
                toolkit: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Open `connect_url` in a browser signed in to the tenant's console */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ConnectStart"];
                };
            };
            /** @description The toolkit does not use OAuth2, or this server has no client for it */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_connection: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
                toolkit: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Disconnected; the tokens are deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_toolset: {
        parameters: {
            query?: {
                /** @description openai-realtime (default), openai-chat, openai-responses, anthropic or mcp. */
                format?: string;
                /** @description OpenAI strict mode. */
                strict?: boolean;
                /** @description auto, none, required, or a function name. */
                tool_choice?: string;
            };
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description `{tools, tool_choice}` in the provider's format */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    history: {
        parameters: {
            query?: {
                /** @description At most this many (1-500, default 100). */
                limit?: number;
                /** @description Skip this many of the newest first (0-10000, default 0): the next page. */
                offset?: number;
                /** @description One rule's transitions only. */
                rule?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertHistory"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_rules: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertRuleList"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_rule: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AlertRuleBody"];
            };
        };
        responses: {
            /** @description Made; `secret` is shown this once */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedAlertRule"];
                };
            };
            /** @description `invalid_alert_rule`: every problem at its JSON Pointer; or the tenant has its most rules */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description A rule of that id exists */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_rule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertRuleView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_rule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted, with its history and undelivered notifications */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_keys: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyView"][];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_key: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewKey"];
            };
        };
        responses: {
            /** @description The key is shown once */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedKey"];
                };
            };
            /** @description The body is not JSON, or a value in it is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    revoke_key: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                key_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_calls: {
        parameters: {
            query?: {
                /** @description The `next` cursor of the previous page: the calls older than it. */
                after?: string;
                /** @description Calls whose active agent is this one. */
                agent?: string;
                /** @description The `previous` cursor of a page: the calls newer than it. */
                before?: string;
                /** @description Calls with an invocation that failed with this error code (e.g. `timeout`). */
                error?: string;
                /** @description The call with this id. */
                id?: string;
                /** @description Calls per page, 1 to 200 (default 50). */
                limit?: number;
                /** @description Calls from or to this phone number, as the call carries it (e.g. `+14155550100`). */
                number?: string;
                /** @description `failed` (an invocation failed) or `ok` (none did). */
                outcome?: string;
                /** @description RFC 3339 (e.g. `2026-11-24T09:00:00Z`) or a date: calls started at or after it. */
                since?: string;
                /** @description `active`, `ended`, or `failed` (an invocation failed). */
                status?: string;
                /** @description Calls that invoked this tool. */
                tool?: string;
                /** @description RFC 3339 or a date: calls started before it. */
                until?: string;
                /** @description Calls whose `user.id` is this (a numeric id as its digits). */
                user_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallList"];
                };
            };
            /** @description A bad value (time, cursor, limit, status): the message names the parameter and the fix */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_call: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewCall"];
            };
        };
        responses: {
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallStarted"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_call: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    end_call: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ended: what was still running was cancelled */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_invocations: {
        parameters: {
            query?: {
                /**
                 * @description The `next` cursor of a page: the records after it. Without `after` or `before`, the
                 *     call's first records.
                 */
                after?: string;
                /** @description The `previous` cursor of a page: the records before it (the newest of them). */
                before?: string;
                /** @description Records per page, 1 to 200 (default 50). */
                limit?: number;
            };
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvocationList"];
                };
            };
            /** @description A bad cursor or limit: the message names the parameter and the fix */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    invoke: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewInvocation"];
            };
        };
        responses: {
            /** @description Always an answer for the model, also when the tool failed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["InvocationResult"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    cancel_response: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                call_id: string;
                response_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Read tools of that response are cancelled; write tools finish; transfers and hang-ups are dropped */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The call has ended */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_connections: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ConnectionList"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_features: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_features: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, unknown>;
            };
        };
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_mcp_servers: {
        parameters: {
            query?: {
                /** @description The `next` cursor of the previous page; absent or empty: from the start. */
                after?: string;
                /** @description Items per page, 1 to 200 (default 50). */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PageOf_McpServerView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_mcp_server: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServerView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_mcp_server: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["McpServerBody"];
            };
        };
        responses: {
            /** @description Registered; its tools were listed if it answered (`tools_error` says why not) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpServerView"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_mcp_server: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed; agents that attached its tools no longer offer them */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_mcp_server_tools: {
        parameters: {
            query?: {
                /** @description Ask the server now instead of using the list kept since it last announced a change. */
                refresh?: boolean;
            };
            header?: never;
            path: {
                label: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["McpToolList"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The server could not be reached and no earlier list is kept */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_caller_memory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The caller's number as the call's `from` gave it (URL-encoded, e.g. %2B14155550100), or its `user.id` */
                caller: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallerMemoryView"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Nothing is remembered about this caller */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_caller_memory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The caller's number as the call's `from` gave it (URL-encoded), or its `user.id` */
                caller: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Everything remembered about the caller is deleted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CallerForgotten"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    oauth_callback: {
        parameters: {
            query?: {
                /** @description The authorization code. */
                code?: string;
                /** @description Set instead of `code` when the user declined (`access_denied`) or the request was wrong. */
                error?: string;
                /** @description The flow's `state`. */
                state?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Connected: the page names the tenant, the agent and the toolkit */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description Unknown, used or expired state; consent declined */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description This browser did not start the flow (no flow cookie): nothing is connected */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The provider refused or did not answer the code exchange */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_number: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                number: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NumberSetting"];
            };
        };
        responses: {
            /** @description The tenant's `features.realtime` after the change */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    webhook_route: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, unknown>;
            };
        };
        responses: {
            /** @description Taken (or a repeat, or an event type that needs nothing) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, unknown>;
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Bad, stale or missing signature or timestamp; also an unknown tenant or one without a webhook secret, answered alike */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_secrets: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecretView"][];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_secret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SecretValue"];
            };
        };
        responses: {
            /** @description Stored, sealed; it cannot be read back */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_secret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_tenants: {
        parameters: {
            query?: {
                /** @description The `next` cursor of the previous page; absent or empty: from the start. */
                after?: string;
                /** @description Items per page, 1 to 200 (default 50). */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PageOf_TenantView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_tenant: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewTenant"];
            };
        };
        responses: {
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TenantView"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_tenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TenantView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_tenant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted with everything it owned */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_tenant_key: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                tenant_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NewKey"];
            };
        };
        responses: {
            /** @description The key is shown once */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedKey"];
                };
            };
            /** @description The body is not JSON, or a value in it is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_toolkits: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolkitList"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_toolkit: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolkitView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_tools: {
        parameters: {
            query?: {
                /** @description The `next` cursor of the previous page; absent or empty: from the start. */
                after?: string;
                /** @description Items per page, 1 to 200 (default 50). */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PageOf_ToolView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    create_tool: {
        parameters: {
            query?: {
                /**
                 * @description A change note kept with the new version (at most 500 characters), shown in the
                 *     versions list.
                 */
                note?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, unknown>;
            };
        };
        responses: {
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"];
                };
            };
            /** @description Every problem, each with its JSON Pointer and fix */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    validate_tool: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, unknown>;
            };
        };
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Validation"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_tool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The current version */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    put_tool: {
        parameters: {
            query?: {
                /**
                 * @description A change note kept with the new version (at most 500 characters), shown in the
                 *     versions list.
                 */
                note?: string;
            };
            header?: never;
            path: {
                /** @description The tool's name */
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, unknown>;
            };
        };
        responses: {
            /** @description A new version, now current; live calls keep theirs (the same definition as the current version again changes nothing and keeps that version's note) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description Not found (another tenant's resources are not found either) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    delete_tool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted; its versions stay for calls that use them */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    replay_tool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReplayRun"];
            };
        };
        responses: {
            /** @description Each recorded invocation replayed against the draft; nothing is performed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReplayReport"];
                };
            };
            /** @description A draft with problems (each with its JSON Pointer and fix), or a selection out of range */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    rollback_tool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RollbackRun"];
            };
        };
        responses: {
            /** @description A new version with the earlier version's definition, now current; live calls keep theirs */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"];
                };
            };
            /** @description A note over 500 characters */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No such tool, or no such version of it */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The version asked for is what the current version already is */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    test_tool: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TestRun"];
            };
        };
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TestResult"];
                };
            };
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body did not arrive whole within `--body-read-timeout-ms` of the headers */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is larger than the server's `--max-body-bytes` */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is not sent as `Content-Type: application/json` */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The body is JSON of the wrong shape (a missing or mistyped field) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    list_versions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"][];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
    get_version: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The tool's name */
                name: string;
                /** @description A version number, as `GET /v1/tools/{name}/versions` lists them */
                version: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ToolView"];
                };
            };
            /** @description A path or query parameter is not acceptable */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description No API key, or one that is unknown or revoked */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The key may not use this operation (an admin-only endpoint, or a tenant key on one) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The tenant's request rate is over its limit; retry after `Retry-After` seconds */
            429: {
                headers: {
                    /** @description Seconds to wait before retrying */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
            /** @description The database did not answer in time; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorBody"];
                };
            };
        };
    };
}
