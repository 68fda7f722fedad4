// mcpwire console: the live event stream and small form helpers. Loaded as a file (the pages'
// Content-Security-Policy allows no inline script); everything else is htmx attributes.
(function () {
  "use strict";
  var body = document.body;
  var live = document.getElementById("live");

  function setLive(state, text) {
    if (!live) return;
    live.setAttribute("data-state", state);
    live.textContent = text;
  }

  // A live part reloads itself on the events it names; an event that arrives while its reload is
  // in flight may describe a change the reload missed, and the part it swaps in did not hear it,
  // so a part reloads once more when events came in meanwhile ("mcp-again").
  var seq = 0;
  var sentAt = {};
  body.addEventListener("htmx:beforeRequest", function (event) {
    // the part the answer replaces: the part itself, or the part a form inside it targets
    var part = (event.detail && event.detail.target) || event.target;
    if (part && part.id && part.hasAttribute("data-live")) sentAt[part.id] = seq;
  });
  body.addEventListener("htmx:afterSettle", function (event) {
    Object.keys(sentAt).forEach(function (id) {
      var part = document.getElementById(id);
      var sent = sentAt[id];
      if (!part || !part.hasAttribute("data-live")) { delete sentAt[id]; return; }
      if (part.contains(event.target) || event.target.contains(part)) {
        delete sentAt[id];
        if (seq > sent) window.htmx.trigger(part, "mcp-again");
      }
    });
  });

  // Each event of the service's stream becomes a DOM event "mcp-<kind>" on <body>; parts of the
  // page that depend on it reload themselves (hx-trigger="mcp-status from:body").
  var source = body.getAttribute("data-events");
  if (source && window.EventSource) {
    var kinds = ["status", "tools", "prompts", "resources", "approval", "pin", "audit", "server", "reset"];
    var stream = new EventSource(source);
    stream.onopen = function () { setLive("on", "live"); };
    stream.onerror = function () { setLive("off", "reconnecting…"); };
    kinds.forEach(function (kind) {
      stream.addEventListener(kind, function (event) {
        var data = null;
        try { data = JSON.parse(event.data); } catch (e) { data = null; }
        seq += 1;
        body.dispatchEvent(new CustomEvent("mcp-" + kind, { detail: data }));
      });
    });
    window.addEventListener("pagehide", function () { stream.close(); });
  }

  // Raw-JSON fields: refuse to send what does not parse, saying where.
  function checkJson(field) {
    var text = field.value.trim();
    if (!text && !field.required) { field.setCustomValidity(""); return true; }
    try {
      var value = JSON.parse(text);
      var want = field.getAttribute("data-json");
      if (want === "object" && (value === null || typeof value !== "object" || Array.isArray(value))) {
        field.setCustomValidity("Expected a JSON object ({…}).");
      } else if (want === "array" && !Array.isArray(value)) {
        field.setCustomValidity("Expected a JSON array ([…]).");
      } else {
        field.setCustomValidity("");
      }
    } catch (e) {
      field.setCustomValidity("Not valid JSON: " + e.message);
    }
    return field.checkValidity();
  }

  document.addEventListener("input", function (event) {
    var field = event.target;
    if (field && field.hasAttribute && field.hasAttribute("data-json")) {
      field.setCustomValidity("");
    }
  });

  // Before htmx sends a form (or the browser submits it), check the JSON fields that are in use.
  function validate(form) {
    var ok = true;
    form.querySelectorAll("[data-json]").forEach(function (field) {
      if (field.disabled || field.closest("[hidden]")) return;
      if (!checkJson(field)) ok = false;
    });
    if (!ok) form.reportValidity();
    return ok;
  }
  document.addEventListener("submit", function (event) {
    if (event.target.tagName === "FORM" && !validate(event.target)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
  body.addEventListener("htmx:validation:validate", function (event) {
    var field = event.target;
    if (field.hasAttribute && field.hasAttribute("data-json") && !field.disabled) checkJson(field);
  });

  // The try-it form's raw-JSON toggle: only the visible half is sent.
  function applyMode(form) {
    var raw = form.querySelector("input[name=mode][value=json]");
    if (!raw) return;
    var useRaw = raw.checked;
    form.querySelectorAll("[data-mode]").forEach(function (part) {
      var mine = part.getAttribute("data-mode") === (useRaw ? "json" : "form");
      part.hidden = !mine;
      part.querySelectorAll("input, select, textarea").forEach(function (field) { field.disabled = !mine; });
    });
  }
  function initForms(root) {
    root.querySelectorAll("form[data-tryit]").forEach(applyMode);
  }
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field && field.name === "mode" && field.form && field.form.hasAttribute("data-tryit")) {
      applyMode(field.form);
    }
  });
  initForms(document);
  body.addEventListener("htmx:afterSwap", function (event) { initForms(event.target); });
})();

// The chat page: the form goes to /chat/runs and the run's server-sent events are shown as they
// come, always as text nodes (a model's or a server's text is never markup).
(function () {
  "use strict";
  var form = document.querySelector("form[data-chat]");
  if (!form) return;
  var log = document.getElementById("chat-log");
  var status = document.getElementById("chat-status");
  var button = form.querySelector("button[type=submit]");
  var answer = null;

  function item(role) {
    var li = document.createElement("li");
    li.className = "msg from-" + role;
    var tag = document.createElement("span");
    tag.className = "tag";
    tag.textContent = role;
    li.appendChild(tag);
    log.appendChild(li);
    return li;
  }
  function line(parent, cls, text) {
    var div = document.createElement("div");
    div.className = cls;
    div.textContent = text;
    parent.appendChild(div);
    return div;
  }
  function cut(text, most) { return text.length > most ? text.slice(0, most) + "…" : text; }
  function args(value) {
    try { return cut(JSON.stringify(value), 300); } catch (e) { return ""; }
  }

  function show(name, ev) {
    if (name === "run") {
      form.elements.conversation.value = ev.conversation_id || "";
      if (ev.conversation_id) {
        history.replaceState(null, "", "/chat?conversation=" + encodeURIComponent(ev.conversation_id));
      }
    } else if (name === "text_delta") {
      if (ev.thought) return;
      if (!answer) answer = line(item("assistant"), "msg-text", "");
      answer.textContent += ev.text;
    } else if (name === "tool_call_started") {
      var where = (ev.server ? ev.server + " · " : "") + (ev.tool || ev.name);
      line(item("call"), "msg-call", "call " + where + " " + (ev.arguments ? args(ev.arguments) : (ev.raw_arguments || "")));
      answer = null;
    } else if (name === "approval_required") {
      var wait = item("approval");
      line(wait, "msg-approval", "waiting for approval: " + ev.server + " · " + ev.tool + " (risk " + ev.risk + ", " +
        ev.confirmation + " of " + ev.confirmations_needed + ") ");
      var to = document.createElement("a");
      to.href = "/approvals";
      to.textContent = "decide it on the approvals page";
      wait.appendChild(to);
    } else if (name === "approval_resolved") {
      line(item("approval"), "msg-approval", ev.approved ? "approved" : "denied" + (ev.reason ? ": " + ev.reason : ""));
    } else if (name === "tool_result") {
      line(item("tool"), "msg-result", "result of " + ev.name + " (" + ev.outcome + "): " + cut(ev.text || "", 500));
    } else if (name === "final") {
      if (!answer && ev.text) line(item("assistant"), "msg-text", ev.text);
      answer = null;
    } else if (name === "failed") {
      line(item("error"), "msg-text error-text", "the run failed: " + ev.reason);
    }
  }

  function handle(block) {
    var name = "message";
    var data = [];
    block.split("\n").forEach(function (text) {
      if (text.indexOf("event:") === 0) name = text.slice(6).trim();
      else if (text.indexOf("data:") === 0) data.push(text.slice(5).replace(/^ /, ""));
    });
    if (!data.length) return;
    try { show(name, JSON.parse(data.join("\n"))); } catch (e) { /* not JSON: nothing to show */ }
  }

  function failure(response) {
    return response.text().then(function (text) {
      var detail = "the service answered " + response.status;
      try { detail = JSON.parse(text).detail || detail; } catch (e) { /* an HTML page */ }
      throw new Error(detail);
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var prompt = form.elements.prompt.value;
    if (!prompt.trim()) return;
    var body = new URLSearchParams(new FormData(form));
    line(item("user"), "msg-text", prompt);
    form.elements.prompt.value = "";
    button.disabled = true;
    status.textContent = "running…";
    answer = null;
    fetch("/chat/runs", {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRF-Token": form.elements.csrf_token.value }
    }).then(function (response) {
      var kind = response.headers.get("content-type") || "";
      if (!response.ok || kind.indexOf("text/event-stream") !== 0) return failure(response);
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) return;
          buffer += decoder.decode(chunk.value, { stream: true });
          var blocks = buffer.split("\n\n");
          buffer = blocks.pop();
          blocks.forEach(handle);
          return pump();
        });
      }
      return pump();
    }).then(function () {
      status.textContent = "done";
    }, function (err) {
      line(item("error"), "msg-text error-text", String((err && err.message) || err));
      status.textContent = "";
    }).then(function () { button.disabled = false; });
  });
})();
