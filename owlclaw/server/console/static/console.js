// Live pages: an element with data-stream="URL" receives the server-sent events of that URL.
// Each event's data is an HTML fragment rendered (and escaped) by the server's templates:
// a "step" is appended, a "delivery" replaces the shown delivery of the same message.
"use strict";
function fragment(html) {
  const item = document.createElement("template");
  item.innerHTML = html; // server-rendered with autoescape
  return item.content;
}
document.addEventListener("DOMContentLoaded", () => {
  for (const target of document.querySelectorAll("[data-stream]")) {
    const source = new EventSource(target.dataset.stream);
    source.addEventListener("step", (message) => target.append(fragment(message.data)));
    source.addEventListener("delivery", (message) => {
      const fresh = fragment(message.data).firstElementChild;
      const id = CSS.escape(fresh.dataset.message);
      target.querySelector(`[data-message="${id}"]`)?.replaceWith(fresh);
    });
    source.addEventListener("end", () => {
      source.close();
      target.dataset.ended = "true";
    });
  }
});
