/* Task page: the action's payload as a form generated from its JSON Schema (JSON Editor,
   vendored under vendor/), with the raw JSON box one click away. The textarea stays the
   field that is submitted: the form writes into it. As you type, the payload is sent to
   payload-check/, which runs the very validation a save runs, and its verdict is shown
   under the form (the server stays the authority). */
(function () {
  "use strict";
  var editor = null;
  var ready = false;  // JSON Editor builds itself asynchronously: no get/set before "ready"
  var mode = "form";
  var timer = null;
  var seq = 0;
  var touched = false;  // a new, empty payload is not judged before the operator types
  var held = [];  // secret fields shown as "set" (stored, never sent to the page)
  var SET = "set";

  function byId(id) { return document.getElementById(id); }

  function make(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) { node.textContent = text; }
    return node;
  }

  function parse(text) {
    try { return { value: JSON.parse(text || "{}") }; } catch (e) { return { error: e.message }; }
  }

  function csrf() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // Text stays text. JSON Editor "cleans" every value and label by assigning it to the
  // innerHTML of a <div> of this page and reading its textContent back (cleanText, and
  // purify() built on it): markup stored in a payload, an <img onerror=...> for one, would
  // run there, and tags would be cut out of the value. The editor writes values with
  // input.value and labels with textContent, which show text as text: nothing to clean.
  function asText(text) { return text; }
  function textOnly(JSONEditor) {
    [JSONEditor.AbstractEditor, JSONEditor.AbstractTheme].forEach(function (base) {
      if (base && base.prototype) {
        base.prototype.cleanText = asText;
        if ("purify" in base.prototype) { base.prototype.purify = asText; }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var textarea = byId("id_payload");
    var select = byId("id_action");
    var data = byId("tasks-action-schemas");
    if (!textarea || !select || !data || !window.JSONEditor) { return; }
    var schemas = JSON.parse(data.textContent);
    textOnly(window.JSONEditor);

    var description = make("p", { id: "action-description", "class": "tasks-action-description" });
    var anchor = select.closest(".flex-container") || select;
    anchor.parentNode.insertBefore(description, anchor.nextSibling);

    var box = make("div", { id: "payload-editor", "class": "tasks-payload", "data-state": "loading" });
    var tabs = make("div", { "class": "tasks-payload-tabs", role: "tablist" });
    var formTab = make("button", { type: "button", id: "payload-mode-form", role: "tab" }, "Form");
    var rawTab = make("button", { type: "button", id: "payload-mode-raw", role: "tab" }, "Raw JSON");
    tabs.appendChild(formTab);
    tabs.appendChild(rawTab);
    var holder = make("div", { id: "payload-form", "class": "tasks-payload-form" });
    var verdict = make("div", { id: "payload-verdict", "class": "tasks-payload-verdict", "aria-live": "polite" });
    textarea.parentNode.insertBefore(box, textarea);
    box.appendChild(tabs);
    box.appendChild(holder);
    box.appendChild(textarea);
    box.appendChild(verdict);

    function showVerdict(ok, errors) {
      verdict.innerHTML = "";
      box.setAttribute("data-state", ok ? "valid" : "invalid");
      if (ok) {
        verdict.appendChild(make("p", { "class": "tasks-payload-ok" }, "✓ The payload fits the action."));
        return;
      }
      var list = make("ul", { "class": "errorlist" });
      errors.forEach(function (m) { list.appendChild(make("li", {}, m)); });
      verdict.appendChild(list);
    }

    function check() {
      clearTimeout(timer);
      box.setAttribute("data-state", "checking");
      timer = setTimeout(function () {
        var mine = ++seq;
        var body = new URLSearchParams();
        body.set("action", select.value);
        body.set("payload", textarea.value);
        box.setAttribute("data-state", "checking");
        fetch(JSON.parse(byId("tasks-payload-check-url").textContent), {
          method: "POST", credentials: "same-origin", body: body,
          headers: { "X-CSRFToken": csrf(), "Accept": "application/json" }
        }).then(function (r) { return r.json(); })
          .then(function (res) { if (mine === seq) { showVerdict(res.ok, res.errors || []); } })
          .catch(function () { if (mine === seq) { box.setAttribute("data-state", "error"); } });
      }, 250);
    }

    function setMode(next) {
      if (next === "form") {
        var parsed = parse(textarea.value);
        if (parsed.error) { showVerdict(false, ["not valid JSON: " + parsed.error]); return; }
        var value = parsed.value || {};
        if (held.some(function (k) { return value[k] !== SET; })) {
          build(true, true);  // a secret was given a new value as raw JSON: its own form
          return;
        }
        if (editor && ready) { editor.setValue(parsed.value); }
      }
      mode = next;
      box.setAttribute("data-mode", mode);
      formTab.setAttribute("aria-selected", String(mode === "form"));
      rawTab.setAttribute("aria-selected", String(mode === "raw"));
      holder.hidden = mode !== "form" || !editor || !ready;
      textarea.hidden = mode !== "raw";
    }

    function typed(schema, value, top) {
      // An "enum" without a "type" would get a type switcher: give it its values' type.
      // A secret ("writeOnly") field that is stored shows as "set", not as its value.
      if (!schema || typeof schema !== "object") { return schema; }
      var copy = Object.assign({}, schema);
      if (Array.isArray(copy["enum"]) && !copy.type) {
        var kinds = copy["enum"].map(function (v) { return typeof v; });
        if (kinds.every(function (k) { return k === kinds[0]; })) { copy.type = kinds[0]; }
      }
      if (copy.properties) {
        copy.properties = Object.assign({}, copy.properties);
        Object.keys(copy.properties).forEach(function (k) {
          var sub = copy.properties[k];
          var inner = value && typeof value === "object" ? value[k] : undefined;
          if (top && sub && sub.writeOnly && inner === SET) {
            held.push(k);
            copy.properties[k] = {
              type: "string", readOnly: true, title: k,
              description: "Set: stored, never shown. To change it, replace \"set\" in " +
                "Raw JSON; to remove it, delete the line."
            };
          } else {
            copy.properties[k] = typed(sub, inner, false);
          }
        });
      }
      return copy;
    }

    function fitting(value, schema) {
      // Keep what the new action's schema knows about when the action changes.
      if (!value || typeof value !== "object" || Array.isArray(value)) { return {}; }
      var props = (schema && schema.properties) || null;
      if (!props) { return value; }
      var kept = {};
      Object.keys(value).forEach(function (k) { if (k in props) { kept[k] = value[k]; } });
      return kept;
    }

    function build(keepValue, asForm) {
      var entry = schemas[select.value];
      description.textContent = entry ? entry.description : "";
      if (editor) { editor.destroy(); editor = null; }
      ready = false;
      holder.innerHTML = "";
      // Hidden until "ready": on "ready" the form is filled from the raw JSON, so anything
      // typed into a field before then (the new action's fields appear at once) was lost.
      holder.hidden = true;
      held = [];
      if (!entry) {
        setMode("raw");
        if (select.value) { check(); }  // an action no longer registered: say so
        return;
      }
      var parsed = parse(textarea.value);
      var start = parsed.error ? {} : (keepValue ? parsed.value : fitting(parsed.value, entry.schema));
      var schema = typed(entry.schema, start, true);
      var pristine = !textarea.value.trim() || textarea.value.trim() === "{}";
      editor = new window.JSONEditor(holder, {
        schema: schema,
        startval: start,
        theme: "html",
        iconlib: null,
        disable_collapse: true,
        disable_edit_json: true,
        disable_properties: true,
        disable_array_delete_all_rows: true,
        disable_array_delete_last_row: true,
        show_opt_in: true,
        no_additional_properties: true,
        prompt_before_delete: false,
        show_errors: "change",
        form_name_root: "payload_form"
      });
      var wasRaw = mode === "raw";
      editor.on("ready", function () {
        ready = true;
        if (!entry.schema.properties) {
          holder.appendChild(make("p", { "class": "tasks-muted" },
            "This action's schema names no fields: edit the payload as raw JSON."));
        }
        if (parsed.error) {
          setMode("raw");
          showVerdict(false, ["not valid JSON: " + parsed.error]);
        } else {
          mode = "raw";  // setMode("form") below reads the box into the form
          setMode(wasRaw && keepValue && !asForm ? "raw" : "form");
        }
        if (mode === "form") { textarea.value = JSON.stringify(editor.getValue(), null, 2); }
        if (!pristine) { check(); }  // a new payload is judged once something is typed
      });
      editor.on("change", function () {
        if (!ready) { return; }
        if (mode === "form") {
          textarea.value = JSON.stringify(editor.getValue(), null, 2);
        }
        if (touched || !pristine) { check(); }
      });
    }

    ["input", "change"].forEach(function (type) {
      holder.addEventListener(type, function () { touched = true; }, true);
    });
    // JSON Editor reads a field on "change" (when it loses focus); pass each keystroke on,
    // so the raw JSON and the verdict follow the typing.
    holder.addEventListener("input", function (event) {
      var field = event.target;
      if (field.matches("input[type=text], input[type=number], input:not([type]), textarea")) {
        field.dispatchEvent(new Event("change", { bubbles: true }));
      }
    });
    formTab.addEventListener("click", function () { setMode("form"); });
    rawTab.addEventListener("click", function () { setMode("raw"); });
    textarea.addEventListener("input", function () {
      if (mode === "raw") { check(); }
    });
    select.addEventListener("change", function () { build(false); });
    // JSON Editor announces a change on the next animation frame, and the raw box follows
    // it from there: a save right after the last keystroke sent the box without it (a
    // payload saved as {"message": ""}). The form's value goes into the box as it is sent.
    if (textarea.form) {
      textarea.form.addEventListener("submit", function () {
        if (mode === "form" && editor && ready) {
          textarea.value = JSON.stringify(editor.getValue(), null, 2);
        }
      });
    }
    build(true);
  });
})();
