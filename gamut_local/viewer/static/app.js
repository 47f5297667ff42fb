// The adjudication queue and the calibration sample's queue: keys 1-4 save a verdict (one POST, appended at once on the server)
// and move on; n/p or the arrows step through the queue. Nothing else on the site needs JS.
(function () {
  "use strict";
  const cell = document.getElementById("cell");
  if (!cell) return;
  const labels = ["meets", "partially_meets", "missing", "contradicts"];
  const status = document.getElementById("status");

  function go(pos) {
    if (pos === "" || pos === undefined) return;
    const url = new URL(window.location.href);
    url.searchParams.set("pos", pos);
    window.location.href = url.toString();
  }

  async function save(label) {
    if (cell.dataset.writable !== "1") {
      status.textContent = "This viewer writes nothing (read-only or no --annotator).";
      return;
    }
    status.textContent = "saving…";
    const body = {question_id: cell.dataset.question, model: cell.dataset.model,
                  variant: cell.dataset.variant, check_id: cell.dataset.check, verdict: label,
                  note: document.getElementById("note").value};
    if (cell.dataset.sample) body.sample = cell.dataset.sample;
    let res;
    try {
      res = await fetch("/api/verdicts", {method: "POST", headers: {"Content-Type": "application/json"},
                                          body: JSON.stringify(body)});
    } catch (e) {
      status.textContent = "not saved: " + e;
      return;
    }
    const data = await res.json();
    if (!res.ok) {
      status.textContent = "not saved: " + data.error;
      return;
    }
    status.textContent = "saved: " + label;
    document.querySelectorAll(".choice").forEach(b => b.classList.toggle("chosen", b.dataset.label === label));
    if (cell.dataset.sample) {  // the calibration sample: on to the first check not yet graded
      const url = new URL(window.location.href);
      url.searchParams.delete("pos");
      window.location.href = url.toString();
    } else if (cell.dataset.next !== "") go(cell.dataset.next);
    else window.location.reload();
  }

  document.querySelectorAll(".choice").forEach(b => b.addEventListener("click", () => save(b.dataset.label)));
  document.getElementById("next").addEventListener("click", e => { e.preventDefault(); go(cell.dataset.next); });
  document.getElementById("prev").addEventListener("click", e => { e.preventDefault(); go(cell.dataset.prev); });
  const todo = document.getElementById("next-todo");
  if (todo) todo.addEventListener("click", e => { e.preventDefault(); go(todo.dataset.pos); });

  document.addEventListener("keydown", e => {
    const t = e.target.tagName;
    if (t === "TEXTAREA" || t === "INPUT" || t === "SELECT" || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key >= "1" && e.key <= "4") { e.preventDefault(); save(labels[Number(e.key) - 1]); }
    else if (e.key === "n" || e.key === "ArrowRight") { e.preventDefault(); go(cell.dataset.next); }
    else if (e.key === "p" || e.key === "ArrowLeft") { e.preventDefault(); go(cell.dataset.prev); }
  });
})();
