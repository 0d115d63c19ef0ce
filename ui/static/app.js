// mcpsearch's web page: times in the browser's zone, confirmations, live
// job progress, and uploads by drag and drop. The page works without it,
// but for uploads and live progress.
"use strict";

(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  // Times come as UTC; show them in the browser's zone.
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      const d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) {
        t.title = t.textContent;
        t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
      }
    });
  }

  // An error answer's message: the page's {"error": "..."} or the upload
  // API's {"error": {"message": "..."}}.
  function message(body, status) {
    if (body && typeof body.error === "string") return body.error;
    if (body && body.error && body.error.message) return body.error.message;
    if (status === 0) return "The server could not be reached; check the connection and try again.";
    return "The server answered " + status + "; try again.";
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function badge(tone, text) {
    return el("span", { class: "badge " + tone }, text);
  }

  // Job progress: every element with data-job whose job has not ended is
  // read again each second until it ends.
  const polling = new Set();

  function setText(node, sel, text) {
    const e = node.querySelector(sel);
    if (e) e.textContent = text || "";
  }

  function render(node, job) {
    const p = node.querySelector("progress");
    if (p) {
      // A bar without a value is one whose end cannot be told yet (a
      // crawl finds its pages as it goes): it moves without claiming how
      // far it is. Its colour says how the job stands or ended.
      p.className = job.tone;
      if (job.indeterminate) {
        p.removeAttribute("value");
        p.textContent = "";
      } else {
        p.value = job.percent;
        p.textContent = job.percent + "%";
      }
    }
    setText(node, "[data-pages]", job.pages);
    setText(node, "[data-files]", job.files);
    const st = node.querySelector("[data-status]");
    if (st) st.replaceChildren(badge(job.tone, job.outcome));
    setText(node, "[data-error]", job.error);
    const why = node.querySelector("[data-why]");
    if (why) why.hidden = !job.error;
    if (job.final) {
      node.dataset.final = "true";
      node.querySelectorAll("form[data-cancel]").forEach(function (f) { f.remove(); });
      const fails = node.querySelector("[data-failures]");
      if (fails && job.failures) {
        fails.replaceChildren();
        job.failures.forEach(function (f) {
          const li = el("li", {});
          li.append(el("strong", {}, f.FileName), ": " + f.Reason);
          fails.appendChild(li);
        });
        const h = node.querySelector("[data-failures-h]");
        if (h) h.hidden = job.failures.length === 0;
      }
    }
  }

  function poll(node) {
    const id = node.dataset.job;
    if (!id || polling.has(id) || node.dataset.final === "true") return;
    polling.add(id);
    const tick = function () {
      fetch("/ui/api/jobs/" + encodeURIComponent(id), { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, status: r.status, body: b }; }); })
        .then(function (res) {
          if (!res.ok) {
            const err = node.querySelector("[data-error]");
            if (err) err.textContent = message(res.body, res.status);
            polling.delete(id);
            return;
          }
          render(node, res.body);
          if (res.body.final) {
            polling.delete(id);
          } else {
            // Once a second, less often when many jobs are followed.
            setTimeout(tick, Math.max(1000, polling.size * 200));
          }
        })
        .catch(function () { setTimeout(tick, 3000); });
    };
    setTimeout(tick, 500);
  }

  // A job's cancel button, for jobs the page shows live.
  function cancelForm(id) {
    const f = el("form", { method: "post", action: "/ui/jobs/" + encodeURIComponent(id) + "/cancel", "data-cancel": "",
      "data-confirm": "Cancel this job? Its files not yet ready are removed; ready ones stay." });
    f.appendChild(el("input", { type: "hidden", name: "csrf", value: csrf }));
    f.appendChild(el("button", { type: "submit", class: "danger" }, "Cancel"));
    wireConfirm(f);
    wireCancel(f);
    return f;
  }

  // A card for a job started on the add page.
  function jobCard(title) {
    const list = document.querySelector("[data-jobs]");
    const none = document.querySelector("[data-nojobs]");
    if (none) none.hidden = true;
    const li = el("li", {});
    const head = el("div", { class: "head" });
    const name = el("span", { class: "name" }, title);
    const st = el("span", { "data-status": "" });
    st.appendChild(badge("running", "uploading"));
    head.append(name, st);
    const p = el("progress", { max: "100", "aria-label": "Progress of " + title, class: "running" });
    p.value = 0;
    li.append(head, p, el("div", { class: "sub", "data-pages": "" }), el("div", { class: "sub", "data-files": "" }, "starting"),
      el("div", { class: "sub error-text", "data-error": "" }), el("ul", { class: "failures sub", "data-failures": "" }));
    list.prepend(li);
    return li;
  }

  // failed shows a card's request as refused, in words.
  function failed(li, text) {
    li.querySelector("[data-status]").replaceChildren(badge("failed", "failed"));
    const p = li.querySelector("progress");
    p.className = "failed";
    p.value = 0;
    setText(li, "[data-files]", "");
    setText(li, "[data-error]", text);
  }

  // attach makes a card follow job.
  function attach(li, job) {
    li.dataset.job = job.id || job.job_id;
    const link = el("a", { href: "/ui/jobs/" + encodeURIComponent(li.dataset.job) }, li.querySelector(".name").textContent);
    li.querySelector(".name").replaceChildren(link);
    li.querySelector(".head").appendChild(cancelForm(li.dataset.job));
    if (job.status) render(li, job);
    poll(li);
  }

  function conversation() {
    const input = document.querySelector("[data-conversation]");
    const v = input ? input.value.trim() : "";
    if (!v && input) {
      input.focus();
      input.reportValidity();
    }
    return v;
  }

  // upload sends files to where the drop zone says: a conversation's
  // files, or a failed file's retry.
  function upload(files, zone) {
    const conv = conversation();
    if (!conv || files.length === 0) return;
    const names = Array.from(files).map(function (f) { return f.name; });
    const li = jobCard(names.length === 1 ? names[0] : names.length + " files: " + names.join(", "));
    const form = new FormData();
    Array.from(files).forEach(function (f) { form.append("file", f, f.name); });
    const xhr = new XMLHttpRequest();
    xhr.open("POST", zone.dataset.action || "/ui/conversations/" + encodeURIComponent(conv) + "/files");
    xhr.setRequestHeader("X-CSRF-Token", csrf);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) {
        setText(li, "[data-files]", "uploading " + Math.round(e.loaded * 100 / e.total) + "%");
      }
    };
    xhr.onload = function () {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
      const files = body && body.files ? body.files : [];
      const fails = li.querySelector("[data-failures]");
      files.forEach(function (f) {
        if (f.result === "refused") {
          fails.appendChild(el("li", {}, (f.file_name || "a file") + ": " + (f.refusal ? f.refusal.message : "refused")));
        } else if (f.result === "duplicate") {
          fails.appendChild(el("li", {}, (f.file_name || "a file") + ": already in the conversation, not stored again (a duplicate)"));
        }
      });
      if (body && body.job_id) {
        attach(li, { id: body.job_id });
        return;
      }
      failed(li, message(body, xhr.status));
    };
    xhr.onerror = function () { failed(li, message(null, 0)); };
    xhr.send(form);
  }

  function wireDrop(zone) {
    const input = document.querySelector("[data-files]");
    ["dragenter", "dragover"].forEach(function (t) {
      zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (t) {
      zone.addEventListener(t, function () { zone.classList.remove("over"); });
    });
    zone.addEventListener("drop", function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) upload(e.dataTransfer.files, zone);
    });
    if (input) {
      input.addEventListener("change", function () {
        upload(input.files, zone);
        input.value = "";
      });
    }
  }

  // The URL form, sent by script so that its job shows here.
  function wireURL(form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const conv = conversation();
      if (!conv) return;
      const data = new FormData(form);
      data.set("conversation", conv);
      const title = (data.get("crawl") ? "crawl " : "") + data.get("url");
      const li = jobCard(title);
      setText(li, "[data-files]", "sending");
      fetch(form.action, { method: "POST", body: new URLSearchParams(data), credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRF-Token": csrf } })
        .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, status: r.status, body: b }; }); })
        .then(function (res) {
          if (!res.ok) {
            failed(li, message(res.body, res.status));
            return;
          }
          form.querySelector('input[name="url"]').value = "";
          attach(li, res.body);
        })
        .catch(function () { failed(li, message(null, 0)); });
    });
    // The crawl's options show when a crawl is asked for.
    const crawl = form.querySelector("#crawl");
    const options = form.querySelector("#crawl-options");
    if (crawl && options) {
      const sync = function () { options.hidden = !crawl.checked; options.disabled = !crawl.checked; };
      crawl.addEventListener("change", sync);
      sync();
    }
  }

  // Cancel buttons cancel in place.
  function wireCancel(form) {
    form.addEventListener("submit", function (e) {
      if (e.defaultPrevented) return;
      e.preventDefault();
      const node = form.closest("[data-job]");
      fetch(form.action, { method: "POST", credentials: "same-origin", headers: { Accept: "application/json", "X-CSRF-Token": csrf } })
        .then(function (r) { return r.json().then(function (b) { return { ok: r.ok, status: r.status, body: b }; }); })
        .then(function (res) {
          if (!node) return;
          if (!res.ok) {
            const err = node.querySelector("[data-error]");
            if (err) err.textContent = message(res.body, res.status);
            else window.alert(message(res.body, res.status));
            return;
          }
          render(node, res.body);
        })
        .catch(function () { window.alert(message(null, 0)); });
    });
  }

  // Forms that destroy something ask first. Registered before the cancel
  // handler, so that a refusal stops it.
  function wireConfirm(form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm(form.dataset.confirm)) e.preventDefault();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localise(document);
    document.querySelectorAll("form[data-confirm]").forEach(wireConfirm);
    document.querySelectorAll("form[data-cancel]").forEach(wireCancel);
    document.querySelectorAll("[data-job]").forEach(poll);
    document.querySelectorAll("[data-drop]").forEach(wireDrop);
    document.querySelectorAll("form[data-addurl]").forEach(wireURL);
  });

})();
