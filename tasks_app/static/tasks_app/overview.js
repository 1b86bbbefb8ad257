/* Overview: fill the health table when the page was rendered without a cached result
   (the checks wait for worker pings, so the page does not). Vendored, no dependencies. */
(function () {
  "use strict";
  function cell(tag, text, cls) {
    var node = document.createElement(tag);
    node.textContent = text;
    if (cls) { node.className = cls; }
    return node;
  }
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("health");
    if (!box || box.getAttribute("data-state") === "ready") { return; }
    fetch(box.getAttribute("data-url"), { credentials: "same-origin" })
      .then(function (response) { return response.json(); })
      .then(function (data) {
        var body = box.querySelector("tbody");
        body.innerHTML = "";
        Object.keys(data.health).forEach(function (name) {
          var check = data.health[name];
          var row = document.createElement("tr");
          row.className = check.ok ? "tasks-ok" : "tasks-down";
          row.appendChild(cell("th", name));
          var state = document.createElement("td");
          state.appendChild(cell("span", check.ok ? "up" : "down",
                                 "tasks-badge " + (check.ok ? "tasks-completed" : "tasks-failed")));
          row.appendChild(state);
          row.appendChild(cell("td", check.detail || "", "tasks-muted"));
          body.appendChild(row);
        });
        box.setAttribute("data-state", "ready");
      })
      .catch(function () { box.setAttribute("data-state", "error"); });
  });
})();
