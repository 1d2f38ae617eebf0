/** Typed errors carrying the server's error envelope (`{"error": {"code", "message", "details"}}`). */

/** Base of every error this package throws. */
export class SwitchboardError extends Error {
  override name = "SwitchboardError";
}

/** The server could not be reached, or did not answer in time (after the retries allowed). */
export class TransportError extends SwitchboardError {
  override name = "TransportError";
}

/** The server answered with an error status; `code`, `message` and `details` are its envelope. */
export class ApiError extends SwitchboardError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly serverMessage: string,
    readonly details: unknown,
    readonly method: string,
    readonly path: string,
  ) {
    super(`${method} ${path}: ${status} ${code}: ${serverMessage}`);
  }
}

/** 400/415/422: the request was refused as it is; `details` says what to change. */
export class BadRequest extends ApiError {
  override name = "BadRequest";
}
/** 401/403: the API key is missing, wrong or lacks the right (a tenant key, not the admin key). */
export class Unauthorized extends ApiError {
  override name = "Unauthorized";
}
/** 404: no such agent, call or tool in this key's tenant. */
export class NotFound extends ApiError {
  override name = "NotFound";
}
/** 409: e.g. the call has ended, or its id is taken. */
export class Conflict extends ApiError {
  override name = "Conflict";
}
/** 429: too many live calls or requests; `details` may hold `retry_after_s`. */
export class RateLimited extends ApiError {
  override name = "RateLimited";
}
/** 5xx: the server failed (or, for 504, had no answer in time: the call's record has it). */
export class ServerError extends ApiError {
  override name = "ServerError";
}

/** The error class that fits an HTTP status. */
export function errorForStatus(
  status: number,
  code: string,
  message: string,
  details: unknown,
  method: string,
  path: string,
): ApiError {
  const cls =
    status === 401 || status === 403
      ? Unauthorized
      : status === 404
        ? NotFound
        : status === 409
          ? Conflict
          : status === 429
            ? RateLimited
            : status >= 500
              ? ServerError
              : BadRequest;
  return new cls(status, code, message, details, method, path);
}
