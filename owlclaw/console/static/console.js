// Live pages: an element with data-stream="URL" receives the server-sent events of that URL.
// Each event's data is an HTML fragment rendered (and escaped) by the server's templates.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const target of document.querySelectorAll("[data-stream]")) {
    const source = new EventSource(target.dataset.stream);
    source.addEventListener("step", (message) => {
      const item = document.createElement("template");
      item.innerHTML = message.data; // server-rendered with autoescape
      target.append(item.content);
    });
    source.addEventListener("end", () => {
      source.close();
      target.dataset.ended = "true";
    });
  }
});
