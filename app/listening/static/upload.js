// The designer's "upload your audio" box: a .zip sent in chunks to /ll/admin/uploads (resumed
// after a dropped connection), imported and checked on the server, then the set's path put in
// the "Your own audio" field that Generate reads. Progress on a bar; every error stays listed
// under the box, naming the file, until the page is reloaded. Runs as gr.HTML's js_on_load
// (`element` is the box).
const q = (s) => element.querySelector(s);
const input = q(".ll-up-file"), bar = q(".ll-up-bar"), status = q(".ll-up-status");
const errors = q(".ll-up-errors");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mb = (n) => (n / 1e6).toFixed(1);

function fail(name, message) {
  const li = document.createElement("li");
  li.textContent = `${name}: ${message}`;
  errors.appendChild(li);
  status.textContent = `${name} was not imported (see the errors below).`;
  element.dataset.state = "failed";
}

async function call(method, url, body, headers) {
  const r = await fetch(url, { method, body, headers, credentials: "same-origin" });
  let j = {};
  try { j = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const e = new Error(j.detail || j.error || `HTTP ${r.status}`);
    e.status = r.status;
    throw e;
  }
  return j;
}

async function keyOf(file) {
  // the same file picked again resumes its unfinished upload
  try {
    const text = new TextEncoder().encode(`${file.name}|${file.size}|${file.lastModified}`);
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", text));
    return [...d.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
  } catch (_) {
    return null; // no crypto.subtle (plain http to another host): no resume
  }
}

function useSet(set) {
  const box = document.querySelector("#lt-stimuli-dir textarea, #lt-stimuli-dir input");
  if (box) {
    box.value = set.path;
    box.dispatchEvent(new Event("input", { bubbles: true }));
  }
}

async function upload(file) {
  element.dataset.state = "uploading";
  bar.value = 0;
  status.textContent = `Starting ${file.name} (${mb(file.size)} MB)…`;
  const json = { "Content-Type": "application/json" };
  const body = JSON.stringify({ name: file.name, size: file.size, key: await keyOf(file) });
  const info = await call("POST", "/ll/admin/uploads", body, json);
  if (info.imported) return done(file, info.imported); // imported before: nothing to send
  const url = `/ll/admin/uploads/${info.upload_id}`;
  let off = info.offset, tries = 0;
  while (off < file.size) {
    const end = Math.min(file.size, off + info.chunk_bytes);
    try {
      const h = { "Content-Range": `bytes ${off}-${end - 1}/${file.size}` };
      off = (await call("PUT", url, file.slice(off, end), h)).offset;
      tries = 0;
    } catch (e) {
      if (++tries > 5 || (e.status && ![409, 502, 503, 504].includes(e.status))) throw e;
      await sleep(500 * 2 ** tries);
      off = (await call("GET", url)).offset;
    }
    bar.value = (100 * off) / file.size;
    element.dataset.progress = String(Math.round(bar.value));
    status.textContent = `Uploading ${file.name}: ${Math.floor(bar.value)}% (${mb(off)} of ${mb(file.size)} MB)`;
  }
  status.textContent = `Checking every file of ${file.name} on the server…`;
  done(file, await call("POST", `${url}/import`, "{}", json));
}

function done(file, set) {
  bar.value = 100;
  element.dataset.progress = "100";
  useSet(set);
  status.textContent = `Imported ${file.name}: ${set.files} files, ${set.systems.length} systems ` +
    `(${set.systems.join(", ")}) × ${set.prompts} prompts. Generate uses it.`;
  element.dataset.state = "done";
}

input.addEventListener("change", () => {
  const file = input.files && input.files[0];
  if (file) upload(file).catch((e) => fail(file.name, e.message));
  input.value = "";
});
