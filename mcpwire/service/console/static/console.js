// mcpwire console: the live event stream and small form helpers. Loaded as a file (the pages'
// Content-Security-Policy allows no inline script); everything else is htmx attributes.
(function () {
  "use strict";
  var body = document.body;
  var live = document.getElementById("live");
  // the page's words for what this script says (translated by the server, as text)
  var words = {};
  try { words = JSON.parse(body.getAttribute("data-text") || "{}"); } catch (e) { words = {}; }
  function say(key, fallback) { return words[key] || fallback; }

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
    stream.onopen = function () { setLive("on", say("live", "live")); };
    stream.onerror = function () { setLive("off", say("reconnecting", "reconnecting…")); };
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
        field.setCustomValidity(say("jsonObject", "Expected a JSON object ({…})."));
      } else if (want === "array" && !Array.isArray(value)) {
        field.setCustomValidity(say("jsonArray", "Expected a JSON array ([…])."));
      } else {
        field.setCustomValidity("");
      }
    } catch (e) {
      field.setCustomValidity(say("jsonInvalid", "Not valid JSON: {error}").replace("{error}", e.message));
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

  // "Copy" buttons: data-copy names the element whose text is copied.
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    var told = button.parentNode.querySelector("[data-copied]");
    navigator.clipboard.writeText(source.textContent).then(function () {
      if (told) told.textContent = say("copied", "Copied.");
    }, function () { /* the browser refused: the text is there to select */ });
  });
})();

// The chat page: the form goes to /chat/runs and the run's server-sent events are shown as they
// come, in copies of the page's <template> elements, always as text nodes (a model's or a
// server's text is never markup).
(function () {
  "use strict";
  var form = document.querySelector("form[data-chat]");
  var root = document.querySelector("[data-chat-text]");
  if (!form || !root) return;
  var log = document.getElementById("chat-log");
  var status = document.getElementById("chat-status");
  var working = document.getElementById("chat-working");
  var workingText = working.querySelector(".working-text");
  var prompt = form.elements.prompt;
  var button = form.querySelector("button[type=submit]");
  var words = {};
  try { words = JSON.parse(root.getAttribute("data-chat-text")); } catch (e) { words = {}; }
  function say(key, values) {
    var text = words[key] || key;
    Object.keys(values || {}).forEach(function (name) { text = text.split("{" + name + "}").join(values[name]); });
    return text;
  }
  var answer = null;
  var calls = {};

  function copy(id) {
    var made = document.getElementById(id).content.firstElementChild.cloneNode(true);
    log.appendChild(made);
    return made;
  }
  function slot(parent, name) { return parent.querySelector("[data-slot=" + name + "]"); }
  function message(kind, text) {
    var li = copy("tpl-" + kind);
    slot(li, "text").textContent = text;
    return li;
  }
  function cut(text, most) { return text.length > most ? text.slice(0, most) + "…" : text; }
  function pretty(value) {
    try { return cut(JSON.stringify(value, null, 2), 2000); } catch (e) { return ""; }
  }
  function millis(ms) {
    if (ms >= 1000) return say("seconds", { s: (ms / 1000).toFixed(ms >= 10000 ? 0 : 1) });
    return say("ms", { ms: ms.toFixed(ms >= 100 ? 0 : 1) });
  }
  function busy(on, text) {
    working.hidden = !on;
    if (text) workingText.textContent = text;
  }
  // the conversations list reloads itself on this event (a run began or ended)
  function lists() { document.body.dispatchEvent(new CustomEvent("mcp-chat")); }

  function show(name, ev) {
    if (name === "run") {
      form.elements.conversation.value = ev.conversation_id || "";
      if (ev.conversation_id) {
        history.replaceState(null, "", "/chat?conversation=" + encodeURIComponent(ev.conversation_id));
      }
      lists();
    } else if (name === "state_changed") {
      if (ev.state === "reasoning" || ev.state === "calling_tools" || ev.state === "awaiting_approval") {
        busy(true, say(ev.state));
      }
    } else if (name === "text_delta") {
      if (ev.thought) return;
      if (!answer) answer = slot(message("assistant", ""), "text");
      answer.textContent += ev.text;
    } else if (name === "tool_call_started") {
      var li = copy("tpl-tool");
      slot(li, "name").textContent = (ev.server ? ev.server + " · " : "") + (ev.tool || ev.name);
      slot(li, "arguments").textContent = ev.arguments ? pretty(ev.arguments) : cut(ev.raw_arguments || "", 2000);
      var state = slot(li, "state");
      state.textContent = say("running");
      state.classList.add("verdict-running");
      calls[ev.call_id] = li;
      answer = null;
    } else if (name === "approval_required") {
      // the server draws the approval (its words, and the buttons only for an approver)
      var item = calls[ev.call_id] || copy("tpl-tool");
      var card = document.createElement("div");
      card.className = "chat-approval";
      card.setAttribute("data-approval", ev.approval_id);
      card.setAttribute("hx-get", "/chat/approvals/" + encodeURIComponent(ev.approval_id));
      card.setAttribute("hx-trigger", "load");
      card.setAttribute("hx-swap", "outerHTML");
      slot(item, "approval").appendChild(card);
      if (window.htmx) window.htmx.process(card);
    } else if (name === "approval_resolved") {
      var decided = log.querySelector('[data-approval="' + CSS.escape(ev.approval_id) + '"]');
      if (decided && window.htmx) window.htmx.trigger(decided, "mcp-decided");
    } else if (name === "tool_result") {
      var done = calls[ev.call_id];
      if (!done) {
        done = copy("tpl-tool");
        slot(done, "name").textContent = ev.name;
      }
      var badge = slot(done, "state");
      badge.classList.remove("verdict-running");
      badge.classList.add(ev.is_error ? "outcome-tool_error" : "outcome-ok");
      badge.textContent = words["outcome_" + ev.outcome] || ev.outcome;
      // the call's own time, and apart from it the time it waited for a person
      var timing = [millis(ev.latency_ms || 0)];
      if (ev.wait_ms) timing.push(say("waited", { time: millis(ev.wait_ms) }));
      slot(done, "timing").textContent = timing.join(" · ");
      var result = slot(done, "result");
      result.textContent = cut(ev.text || "", 5000) + (ev.truncated ? "\n" + say("truncated") : "");
      if (ev.is_error) result.classList.add("error-text");
      answer = null;
    } else if (name === "final") {
      if (!answer && ev.text) message("assistant", ev.text);
      answer = null;
    } else if (name === "failed") {
      message("error", say("failed", { reason: ev.reason }));
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
    var value;
    try { value = JSON.parse(data.join("\n")); } catch (e) { return; /* not JSON: nothing to show */ }
    show(name, value);
  }

  function failure(response) {
    return response.text().then(function (text) {
      var detail = say("serviceAnswered", { status: response.status });
      try {
        detail = JSON.parse(text).detail || detail;
      } catch (e) {
        // a console page: its problem's words
        var found = new DOMParser().parseFromString(text, "text/html").querySelector(".problem");
        if (found && found.textContent.trim()) detail = found.textContent.trim();
      }
      throw new Error(detail);
    });
  }

  function send() {
    var text = prompt.value;
    if (!text.trim()) {
      status.textContent = say("emptyPrompt");
      prompt.focus();
      return;
    }
    var sent = new URLSearchParams(new FormData(form));
    message("user", text);
    prompt.value = "";
    button.disabled = true;
    status.textContent = "";
    busy(true, say("thinking"));
    answer = null;
    fetch("/chat/runs", {
      method: "POST",
      body: sent,
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
      status.textContent = say("done");
    }, function (err) {
      message("error", String((err && err.message) || err));
      status.textContent = "";
    }).then(function () {
      busy(false);
      button.disabled = false;
      lists();
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    send();
  });
  prompt.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!button.disabled) send();
    }
  });
})();
