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
