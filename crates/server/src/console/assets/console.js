// The console's own script (no inline script: the Content-Security-Policy forbids it).
// - A call's timeline follows the call live over server-sent events, and says why when it
//   stops (the session ended, or too many timelines are open).
// - The calls list shows new and ended calls over server-sent events (the page's rows, rendered
//   by the server), and says why when it stops updating itself.
// - Clicking a problem in the editor selects its line in the definition.
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
      if (old) { old.replaceWith(row); return; }
      body.appendChild(row);
      if (total && e.lastEventId) total.textContent = e.lastEventId;
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

  function followList(body) {
    var url = body.getAttribute("data-events");
    if (!url || !window.EventSource) return;
    var source = new EventSource(url);
    source.addEventListener("rows", function (e) {
      body.innerHTML = e.data;
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
    var problem = e.target.closest ? e.target.closest(".problem[data-line]") : null;
    var textarea = document.getElementById("definition");
    if (!problem || !textarea) return;
    var line = parseInt(problem.getAttribute("data-line"), 10);
    if (line > 0) selectLine(textarea, line);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var table = document.getElementById("timeline");
    if (table) follow(table);
    var rows = document.getElementById("calls-rows");
    if (rows) followList(rows);
  });
})();
