// The console's own script (no inline script: the Content-Security-Policy forbids it).
// - A call's timeline follows the call live over server-sent events (new rows at the end, the
//   Context box replaced when the context changes), and says why when it stops (the session
//   ended, or too many timelines are open). Earlier rows load with htmx at the table's top.
// - The calls list shows new and ended calls over server-sent events (the page's rows, rendered
//   by the server), and says why when it stops updating itself.
// - Clicking a problem in an editor (or pressing its button, which the keyboard reaches) selects
//   its line in the JSON, or moves to the box it names. Each JSON editor has line numbers in a
//   gutter that scrolls with it.
// - Times (`<time datetime>`, UTC as the server writes them) are shown in this browser's time
//   zone, the UTC time on hover; without this script the UTC text stays.
// - The editor keeps an unsaved draft in this browser's localStorage (keyed by tenant and tool)
//   and restores it on reload when it was based on the version the page shows; a publish or a
//   rollback clears it. The confirmation before a publish can be dismissed.
(function () {
  "use strict";

  function follow(table) {
    var url = table.getAttribute("data-events");
    if (!url || table.getAttribute("data-ended") === "true" || !window.EventSource) return;
    var body = table.querySelector("tbody");
    var total = document.getElementById("call-total");
    var source = new EventSource(url);
    source.addEventListener("record", function (e) {
      // A row the page already has (its id is the function call's) is replaced, not repeated.
      var holder = document.createElement("tbody");
      holder.innerHTML = e.data;
      var row = holder.firstElementChild;
      if (!row) return;
      var old = row.id ? document.getElementById(row.id) : null;
      localTimes(row);
      if (old) { old.replaceWith(row); return; }
      body.appendChild(row);
      if (e.lastEventId) {
        if (total) total.textContent = e.lastEventId;
        document.querySelectorAll(".call-total").forEach(function (t) { t.textContent = e.lastEventId; });
      }
      recount(table);
    });
    // The call's context, whole and redacted, each time it changes.
    source.addEventListener("context", function (e) {
      var box = document.getElementById("call-context");
      if (box) box.textContent = e.data;
    });
    // The server ends a stream whose session ended, and refuses one past its bounds; either way
    // the page says why and stops following (otherwise the browser would reconnect).
    function stop(e) {
      var note = document.getElementById("timeline-note");
      if (note) { note.textContent = e.data; note.hidden = false; note.setAttribute("data-reason", e.type); }
      table.setAttribute("data-following", "false");
      source.close();
    }
    source.addEventListener("signedout", stop);
    source.addEventListener("refused", stop);
    // A stream the server refused outright (429 past the tenant's request rate) is not
    // reconnected by the browser: say so instead of going quiet.
    source.addEventListener("error", function () {
      if (source.readyState !== EventSource.CLOSED || table.getAttribute("data-following") === "false") return;
      if (table.getAttribute("data-ended") === "true") return;
      stop({ type: "closed", data: "This page stopped following the call live (the server refused the stream). Reload the page to follow it again." });
    });
    source.addEventListener("ended", function () {
      var status = document.getElementById("call-status");
      if (status) { status.textContent = "ended"; status.className = "ended"; }
      table.setAttribute("data-ended", "true");
      source.close();
    });
  }

  // The notice of a long timeline says how many rows the page holds now.
  function recount(table) {
    var shown = document.getElementById("timeline-shown");
    if (shown) shown.textContent = String(table.querySelectorAll("tbody tr[id^='fc-']").length);
  }

  function followList(body) {
    var url = body.getAttribute("data-events");
    if (!url || !window.EventSource) return;
    var source = new EventSource(url);
    source.addEventListener("rows", function (e) {
      body.innerHTML = e.data;
      localTimes(body);
      body.setAttribute("data-updated", String(Date.now()));
    });
    function stop(e) {
      var note = document.getElementById("calls-note");
      if (note) { note.textContent = e.data; note.hidden = false; note.setAttribute("data-reason", e.type); }
      body.setAttribute("data-following", "false");
      source.close();
    }
    source.addEventListener("signedout", stop);
    source.addEventListener("refused", stop);
    source.addEventListener("error", function () {
      if (source.readyState !== EventSource.CLOSED || body.getAttribute("data-following") === "false") return;
      stop({ type: "closed", data: "This list stopped updating itself (the server refused the stream). Reload the page to follow it again." });
    });
  }

  function selectLine(textarea, line) {
    var lines = textarea.value.split("\n");
    var start = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) start += lines[i].length + 1;
    var end = start + (lines[line - 1] || "").length;
    textarea.focus();
    textarea.setSelectionRange(start, end);
    var height = textarea.scrollHeight / Math.max(lines.length, 1);
    textarea.scrollTop = Math.max(0, (line - 5) * height);
  }

  document.addEventListener("click", function (e) {
    var problem = e.target.closest ? e.target.closest(".problem") : null;
    if (!problem) return;
    var field = e.target.closest("[data-field]");
    if (field) {
      var box = document.getElementById(field.getAttribute("data-field"));
      if (box) box.focus();
      return;
    }
    var holder = problem.closest("[data-editor]");
    var textarea = document.getElementById(holder ? holder.getAttribute("data-editor") : "definition");
    var line = parseInt(problem.getAttribute("data-line"), 10);
    if (textarea && line > 0) selectLine(textarea, line);
  });

  // Line numbers beside a JSON editor, scrolled with it (the textarea does not wrap lines).
  function gutter(textarea) {
    var box = textarea.parentNode;
    var numbers = document.createElement("div");
    numbers.className = "gutter";
    numbers.setAttribute("aria-hidden", "true");
    box.insertBefore(numbers, textarea);
    var count = 0;
    function update() {
      var n = textarea.value.split("\n").length;
      if (n !== count) {
        count = n;
        var text = "";
        for (var i = 1; i <= n; i++) text += i + "\n";
        // One line more than the text: room for the textarea's own scrollbar at the bottom.
        numbers.textContent = text + "\n";
      }
      numbers.scrollTop = textarea.scrollTop;
    }
    textarea.addEventListener("input", update);
    textarea.addEventListener("scroll", function () { numbers.scrollTop = textarea.scrollTop; });
    update();
  }

  var timeFormat = null;
  function localTimes(root) {
    if (!root || !root.querySelectorAll) return;
    if (!timeFormat) {
      try {
        timeFormat = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric",
          hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
      } catch (e) { return; }
    }
    var times = Array.prototype.slice.call(root.querySelectorAll("time[datetime]:not([data-local])"));
    if (root.matches && root.matches("time[datetime]:not([data-local])")) times.push(root);
    times.forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      t.title = d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
      t.textContent = timeFormat.format(d);
      t.setAttribute("data-local", "true");
    });
  }

  function keepDraft(textarea) {
    var key = "switchboard.draft." + textarea.getAttribute("data-draft-key");
    var base = textarea.getAttribute("data-base");
    var note = document.getElementById("draft-note");
    var stored = null;
    try { stored = JSON.parse(window.localStorage.getItem(key) || "null"); } catch (e) { stored = null; }
    function say(text) { if (note) { note.textContent = text; note.hidden = false; } }
    if (stored && typeof stored.text === "string" && stored.text !== textarea.value) {
      if (String(stored.base) === base) {
        textarea.value = stored.text;
        say("Restored your unsaved draft (based on v" + base + "); publish it or reload after clearing it to discard.");
        textarea.setAttribute("data-restored", "true");
        textarea.dispatchEvent(new Event("input", { bubbles: true }));
      } else {
        say("An unsaved draft based on v" + stored.base + " was set aside: the tool is now at v" + base + ".");
        window.localStorage.removeItem(key);
      }
    }
    var initial = textarea.value;
    textarea.addEventListener("input", function () {
      try {
        if (textarea.value === initial && textarea.getAttribute("data-restored") !== "true") window.localStorage.removeItem(key);
        else window.localStorage.setItem(key, JSON.stringify({ base: base, text: textarea.value }));
      } catch (e) { say("This browser does not keep drafts: publish before leaving the page."); }
    });
    document.body.addEventListener("htmx:afterSwap", function (e) {
      if (e.target && e.target.querySelector && e.target.querySelector("#published-version")) {
        window.localStorage.removeItem(key);
        textarea.removeAttribute("data-restored");
        initial = textarea.value;
      }
    });
    window.addEventListener("beforeunload", function (e) {
      if (textarea.value !== initial && window.localStorage.getItem(key) === null) {
        e.preventDefault();
        e.returnValue = "";
      }
    });
  }

  document.addEventListener("click", function (e) {
    var dismiss = e.target.closest ? e.target.closest("[data-dismiss]") : null;
    if (!dismiss) return;
    var box = document.getElementById(dismiss.getAttribute("data-dismiss"));
    if (box) box.remove();
  });

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    document.body.addEventListener("htmx:load", function (e) { localTimes(e.target); });
    document.querySelectorAll(".code-editor > textarea").forEach(gutter);
    var definition = document.getElementById("definition");
    if (definition && definition.hasAttribute("data-draft-key")) keepDraft(definition);
    var table = document.getElementById("timeline");
    if (table) {
      follow(table);
      // htmx:load fires on each element a swap added (the button that asked is gone by then).
      document.body.addEventListener("htmx:load", function () { recount(table); });
    }
    var rows = document.getElementById("calls-rows");
    if (rows) followList(rows);
  });
})();
