// The infernet node dashboard: one page per part of the node's state,
// rendered from the snapshots the node streams (server-sent events on
// /dashboard/events). No framework and no third-party code: every value
// from the node (peer IDs, reasons, job reports) goes through esc().
"use strict";

let snap = null; // the latest snapshot

const pages = { status, peers, jobs, runs, money, training };

// ---- helpers ----

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function short(id) { id = String(id || ""); return id.length > 12 ? "…" + id.slice(-8) : id; }
function idCell(id) { return `<span class="mono" title="${esc(id)}">${esc(short(id))}</span>`; }
function chip(state, text) { return `<span class="chip s-${esc(state || "none")}" title="${esc(state)}">${esc(text ?? state)}</span>`; }
function num(n) { return Number(n || 0).toLocaleString("en-US"); }
function zeroTime(t) { return !t || t.startsWith("0001-"); }
function ago(t) {
  if (zeroTime(t)) return "";
  const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return new Date(t).toISOString().slice(0, 16).replace("T", " ");
}
function dur(from, to) {
  if (zeroTime(from)) return "";
  const end = zeroTime(to) ? Date.now() : Date.parse(to);
  const s = (end - Date.parse(from)) / 1000;
  return s < 10 ? s.toFixed(2) + " s" : s < 120 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min";
}
function bytes(n) {
  n = Number(n || 0);
  for (const u of ["B", "KiB", "MiB", "GiB"]) { if (n < 1024 || u === "GiB") return (u === "B" ? n : n.toFixed(1)) + " " + u; n /= 1024; }
}
function msat(n) { return num(n) + " msat"; }
function card(label, value, title) {
  return `<div class="card"${title ? ` title="${esc(title)}"` : ""}><div class="label">${esc(label)}</div><div class="value">${value}</div></div>`;
}
function empty(text) { return `<div class="empty">${esc(text)}</div>`; }
function table(head, rows, cls) {
  if (!rows.length) return "";
  return `<table class="${cls || ""}"><thead><tr>${head.map(h => `<th${h.endsWith("#") ? ' class="num"' : ""}>${esc(h.replace(/#$/, ""))}</th>`).join("")}</tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`;
}
function countBy(xs, f) { const m = {}; for (const x of xs) { const k = f(x); m[k] = (m[k] || 0) + 1; } return m; }

// lineChart draws series of points {x, y} as an SVG line chart. Each point
// is also a circle, with its values in data attributes.
const colors = ["#3451b2", "#e8590c", "#2e7d32", "#8e24aa", "#00838f"];
function lineChart(series, o) {
  const W = o.width || 560, H = o.height || 220, L = 64, R = 36, T = 12, B = 30;
  const pts = series.flatMap(s => s.points);
  if (!pts.length) return empty(o.empty || "Nothing to draw yet.");
  let x0 = Math.min(...pts.map(p => p.x)), x1 = Math.max(...pts.map(p => p.x));
  let y0 = Math.min(o.fit ? Infinity : 0, ...pts.map(p => p.y)), y1 = Math.max(...pts.map(p => p.y));
  if (o.yMin !== undefined) y0 = Math.min(o.yMin, y0);
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (o.fit) {
    // The data's own range, padded: an accuracy from 0.948 to 0.964 drawn
    // from 0 is a flat line.
    const pad = (y1 - y0) / 10 || Math.abs(y1) / 20 || 1;
    y0 -= pad; y1 += pad;
  }
  if (y1 === y0) y1 = y0 + 1;
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R), sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  let svg = `<svg class="chart" data-chart="${esc(o.name)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(o.title || o.name)}">`;
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    svg += `<line class="grid" x1="${L}" x2="${W - R}" y1="${sy(y)}" y2="${sy(y)}"/><text x="${L - 6}" y="${sy(y) + 4}" text-anchor="end">${esc(o.yFormat ? o.yFormat(y) : +y.toPrecision(4))}</text>`;
  }
  const xt = o.xTicks || 4;
  for (let i = 0; i <= xt; i++) {
    const x = x0 + (x1 - x0) * i / xt;
    if (o.xInteger && Math.abs(x - Math.round(x)) > 1e-9) continue;
    svg += `<text x="${sx(x)}" y="${H - 10}" text-anchor="middle">${esc(o.xFormat ? o.xFormat(x) : +x.toPrecision(4))}</text>`;
  }
  svg += `<line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/><line class="axis" x1="${L}" x2="${L}" y1="${T}" y2="${H - B}"/>`;
  series.forEach((s, i) => {
    const c = colors[i % colors.length];
    const p = s.points.map(q => `${sx(q.x).toFixed(1)},${sy(q.y).toFixed(1)}`).join(" ");
    if (s.points.length > 1) svg += `<polyline fill="none" stroke="${c}" stroke-width="2.5" points="${p}" data-series="${esc(s.name)}"/>`;
    for (const q of s.points) svg += `<circle cx="${sx(q.x).toFixed(1)}" cy="${sy(q.y).toFixed(1)}" r="3.5" fill="${c}" data-series="${esc(s.name)}" data-x="${q.x}" data-y="${q.y}"><title>${esc(s.name)}: ${esc(q.label ?? q.y)}</title></circle>`;
  });
  svg += "</svg>";
  const legend = `<div class="legend">${series.map((s, i) => `<span><span class="swatch c${i % colors.length}"></span>${esc(s.name)}</span>`).join("")}</div>`;
  return legend + svg;
}

// ---- pages ----

function status(s) {
  const jobStates = countBy(s.jobs, j => j.state);
  const connected = s.peers.filter(p => p.connected).length;
  const a = s.advert;
  let h = `<div class="cards">` +
    card("Role", s.node.provider ? "provider" : "client only") +
    card("Payments", s.paid ? "Lightning" : "free mode", s.paid ? "lnd configured: hold-invoice escrow" : "no lnd: nothing is paid") +
    card("Peers connected", `${connected} <span class="muted">of ${s.peers.length}</span>`) +
    card("Jobs submitted (shards included)", num(s.jobs.length), Object.entries(jobStates).map(([k, v]) => `${k}: ${v}`).join(", ")) +
    card("Verified", num(jobStates.verified || 0)) +
    card("Runs for others", num(s.runs.length)) +
    card("Training runs", num(s.training.length)) +
    card("Gossip in / out", `${num(s.node.stats.gossip.delivered)} / ${num(s.node.stats.gossip.published)}`) +
    `</div>`;
  if (s.node.eclipsed) {
    h += `<p class="warn" id="eclipsed">Replica votes verify nothing here: ${esc(s.node.eclipsed)}</p>`;
  }
  if (a) {
    h += `<h2>What this node offers</h2><table class="kv"><tbody>` +
      `<tr><th>Backends</th><td>${esc((a.backends || []).join(", "))}</td></tr>` +
      `<tr><th>GPUs</th><td>${(a.gpus || []).length ? a.gpus.map(g => esc(`${g.name} (${bytes(g.memory_bytes)})`)).join(", ") : "none"}</td></tr>` +
      `<tr><th>Slots</th><td data-free="${a.free_slots}" data-slots="${a.slots}">${a.free_slots} free of ${a.slots}</td></tr>` +
      `<tr><th>Price</th><td>${msat(a.price)} per replica</td></tr>` +
      `<tr><th>Cores, memory</th><td>${a.cores} cores, ${bytes(a.memory_bytes)} (jobs up to ${bytes(a.max_memory)})</td></tr>` +
      `<tr><th>Features</th><td>${esc((a.features || []).join(", ") || "none")}</td></tr>` +
      `</tbody></table>`;
  }
  h += `<h2>Addresses</h2><table><tbody>${s.node.addrs.map(x => `<tr><td class="mono">${esc(x)}</td></tr>`).join("")}</tbody></table>`;
  h += `<p class="muted">Software ${esc(s.node.software)} · snapshot ${esc(new Date(s.time).toLocaleTimeString())}</p>`;
  return h;
}

function peers(s) {
  if (!s.peers.length) return empty("No peers yet. Bootstrap from a known node (--bootstrap) or wait for mDNS.");
  const rows = [...s.peers].sort((a, b) => b.reputation - a.reputation).map(p => {
    const a = p.advert;
    const flags = (p.trusted ? chip("verified", "trusted") : "") + (p.banned ? chip("failed", "banned") : "");
    return `<tr data-peer="${esc(p.id)}"><td>${idCell(p.id)}</td>` +
      `<td>${p.connected ? chip("done", p.via || "yes") : chip("none", "no")}</td>` +
      `<td class="num"><span class="bar"><span class="w${Math.round(Math.min(1, Math.max(0, p.reputation)) * 10)}"></span></span> ${p.reputation.toFixed(2)}</td>` +
      `<td>${flags}</td><td class="why">${esc(p.why)}</td>` +
      `<td>${a ? esc((a.backends || []).join(", ")) : '<span class="muted">client</span>'}</td>` +
      `<td class="num">${a ? `${a.free_slots}/${a.slots}` : ""}</td>` +
      `<td class="num">${a ? msat(a.price) : ""}</td>` +
      `<td class="num">${p.latency_ms ? p.latency_ms.toFixed(1) + " ms" : ""}</td>` +
      `<td>${esc(ago(p.last_seen))}</td></tr>`;
  });
  return `<h2>${s.peers.length} peers</h2>` + table(["Peer", "Connected", "Reputation#", "", "Why", "Backends", "Free slots#", "Price#", "Latency#", "Last seen"], rows, "peers");
}

function jobState(j) { return j ? j.state : "pending"; }

function jobs(s) {
  let h = "";
  const sharded = [...s.sharded].reverse();
  const rounds = {}; // sharded job id: its round of a training run
  for (const t of s.training) t.rounds.forEach((r, i) => { if (r.sharded) rounds[r.sharded] = `round ${i + 1} of training run ${short(t.id)}`; });
  if (sharded.length) {
    h += `<h2>Sharded jobs</h2>`;
    for (const sj of sharded) {
      const done = sj.shards.filter(j => j && (j.state === "verified" || j.state === "unverified")).length;
      const chips = sj.shards.map((j, i) => chip(jobState(j), i)).join("");
      const reduce = sj.reduce !== undefined && sj.reduce !== null ? ` reduce ${chip(sj.reduce.state, "R")}` : "";
      h += `<div class="job sharded" data-id="${esc(sj.id)}" data-state="${esc(sj.state)}"><div class="head">${idCell(sj.id)} ${chip(sj.state)} ` +
        `<span><b>${done}</b> of ${sj.shards.length} shards done</span>${sj.via ? `<span>via ${idCell(sj.via)}</span>` : ""}` +
        `${rounds[sj.id] ? `<span class="round muted">${esc(rounds[sj.id])}</span>` : ""}` +
        `${sj.error ? `<span class="muted">${esc(sj.error)}</span>` : ""}</div><div class="shards">${chips}${reduce}</div></div>`;
    }
  }
  const plain = [...s.jobs].reverse().filter(j => !j.announce.shards);
  h += `<h2>Jobs</h2>`;
  if (!plain.length && !sharded.length) return h + empty("No jobs yet: infernet submit job.wasm --input data");
  h += table(["Job", "State", "Replicas", "Agree#", "Module", "Arguments", "Created", "Took#"], plain.map(j =>
    `<tr data-job="${esc(j.id)}" data-state="${esc(j.state)}"><td>${idCell(j.id)}</td><td>${chip(j.state)}${j.error ? ` <span class="muted">${esc(j.error)}</span>` : ""}</td>` +
    `<td class="replicas">${(j.replicas || []).map(r => chip(r.state, short(r.provider))).join("")}</td>` +
    `<td class="num">${j.agree}/${j.announce.replicas}</td><td>${idCell(j.announce.module)}</td>` +
    `<td class="mono">${esc((j.announce.args || []).join(" "))}</td><td>${esc(ago(j.created))}</td><td class="num">${esc(dur(j.created, j.finished))}</td></tr>`), "jobs");
  return h;
}

function runs(s) {
  if (!s.node.provider) return empty("This node runs no jobs for others (--no-provide).");
  if (!s.runs.length) return empty("No runs for others yet.");
  const paid = {};
  for (const p of s.payments) if (!p.outgoing && !p.bond) paid[p.job + "/" + p.replica] = p;
  const rows = [...s.runs].reverse().map(r => {
    const p = paid[r.job + "/" + r.replica];
    return `<tr data-job="${esc(r.job)}" data-state="${esc(r.state)}"><td>${idCell(r.job)}</td><td class="num">${r.replica}</td><td>${idCell(r.client)}</td>` +
      `<td>${chip(r.state)}${r.error ? ` <span class="muted">${esc(r.error)}</span>` : ""}</td><td>${esc(ago(r.started))}</td>` +
      `<td class="num">${esc(dur(r.started, r.finished))}</td><td class="num">${p ? chip(p.state, msat(p.amount_msat)) : '<span class="muted">free</span>'}</td></tr>`;
  });
  return `<h2>${s.runs.length} replicas run for others</h2>` + table(["Job", "Replica#", "Client", "State", "Started", "Took#", "Paid#"], rows, "runs");
}

// cumulative is the running total of the settled payments f selects, as
// chart points over time (seconds before now).
function cumulative(pays, f) {
  let total = 0;
  const now = Date.now();
  return pays.filter(f).sort((a, b) => Date.parse(a.updated) - Date.parse(b.updated)).map(p => {
    total += p.amount_msat + (p.outgoing ? p.fee_msat || 0 : 0);
    return { x: (Date.parse(p.updated) - now) / 1000, y: total, label: msat(total) };
  });
}

// before formats a time axis of seconds before now in the unit its span
// (the oldest point, oldest) calls for.
function before(oldest) {
  const span = Math.abs(oldest);
  const [unit, name] = span < 120 ? [1, "s"] : span < 7200 ? [60, "min"] : span < 172800 ? [3600, "h"] : [86400, "d"];
  return x => x > -unit / 2 ? "now" : `${Math.round(-x / unit)} ${name} ago`;
}

// open reports whether a payment's funds are out but not yet settled or
// returned: held, for a price; at stake, for collateral (as `infernet
// earnings` and `spending` count them).
function isOpen(p) { return p.state === "locked" || p.state === "releasing" || p.state === "paying"; }

// neverStaked reports whether a stake p, cancelled, never was at stake (as
// the CLI's neverStaked): on the provider its payment failed on its way; a
// stake the client returned ends in lnd's word for a cancelled hold
// invoice. On the client, a replica ended before the provider paid it.
function neverStaked(p) { return p.outgoing ? !!p.error && !p.error.includes("INCORRECT_PAYMENT_DETAILS") : !!p.error; }

// payKind names what a payment is for, in the CLI's words (KIND).
function payKind(p) { return p.bond ? "collateral" : p.fair ? "price (fair)" : p.aggregate ? "job via aggregator" : "price"; }

// payNote is the CLI's note on a payment: what became of a stake, else its error.
function payNote(p) {
  if (p.bond && p.state === "canceled") return neverStaked(p) ? "not staked: " + (p.error || "") : "stake returned";
  if (p.bond && p.state === "settled") return "stake taken: the provider was caught lying";
  return p.error || "";
}

// sum is the msat of the payments f selects, routing fees left out.
function sum(pays, f) { return pays.filter(f).reduce((t, p) => t + p.amount_msat, 0); }

// collateral draws the cards of the stakes of one direction: those a
// client holds from its providers (incoming), or those this node staked as
// a provider (outgoing). None when there are none.
function collateral(pays, outgoing) {
  const bonds = pays.filter(p => p.bond && p.outgoing === outgoing);
  if (!bonds.length) return "";
  const taken = bonds.filter(p => p.state === "settled"), fee = taken.reduce((t, p) => t + (p.fee_msat || 0), 0);
  const words = outgoing ?
    { at: "Your collateral at stake", taken: "Collateral taken from you (slashed)", back: "Collateral returned to you",
      atTitle: "stakes you paid on replicas you run, held by their clients until their verdicts",
      takenTitle: "stakes your clients took: they caught a result of yours as a lie", backTitle: "stakes your clients gave back after their verdicts" } :
    { at: "Collateral at stake with you", taken: "Collateral taken by you", back: "Collateral returned by you",
      atTitle: "providers' stakes on your replicas, held until their verdicts: not yours unless a provider is caught lying",
      takenTitle: "providers' stakes you took: they were caught lying", backTitle: "providers' stakes you gave back after the verdict" };
  return `<div class="cards collateral" data-direction="${outgoing ? "outgoing" : "incoming"}">` +
    card(words.at, msat(sum(bonds, isOpen)), words.atTitle) +
    card(words.taken, msat(sum(taken, () => true)) + (fee ? `<span class="muted fee">+ ${msat(fee)} routing fees</span>` : ""), words.takenTitle) +
    card(words.back, msat(sum(bonds, p => p.state === "canceled" && !neverStaked(p))), words.backTitle) + `</div>`;
}

function money(s) {
  // Collateral (p.bond) is no price: a stake at stake, returned or taken
  // is counted apart, as `infernet earnings` and `spending` do.
  const pays = s.payments, prices = pays.filter(p => !p.bond);
  const settled = p => p.state === "settled";
  const earned = cumulative(prices, p => !p.outgoing && settled(p)), spent = cumulative(prices, p => p.outgoing && settled(p));
  const held = sum(prices, p => !p.outgoing && isOpen(p));
  let h = "";
  if (!s.paid) h += `<div class="empty" data-free="true">Free mode: this node has no lnd configured, so nothing is paid or charged. Start it with --lnd.* flags to earn.</div>`;
  if (pays.length >= s.payments_limit) h += `<p class="muted">Totals and chart of the newest ${num(s.payments_limit)} payments (infernet earnings and spending list them all).</p>`;
  h += `<div class="cards prices">` + card("Earned", msat(earned.length ? earned[earned.length - 1].y : 0), "prices settled to you; collateral apart") +
    card("Spent (with routing fees)", msat(spent.length ? spent[spent.length - 1].y : 0), "prices you settled, with their routing fees; collateral apart") +
    card("Held in escrow for you", msat(held), "prices your clients' funds hold for you until their verdicts") + card("Payments", num(pays.length)) + `</div>`;
  const stakes = collateral(pays, false) + collateral(pays, true);
  if (stakes) h += `<h2>Collateral</h2><p class="muted">Stakes providers pay on their replicas and their clients hold until the verdict: returned, or taken from a provider caught lying. Not prices: counted apart from the above.</p>` + stakes;
  h += `<h2>Over time</h2>` + lineChart([{ name: "earned", points: earned }, { name: "spent", points: spent }].filter(x => x.points.length),
    { name: "money", title: "cumulative msat of prices over time", empty: "No settled payments yet.",
      xFormat: before(Math.min(0, ...earned.map(p => p.x), ...spent.map(p => p.x))), yFormat: y => num(Math.round(y)) });
  const recent = [...pays].reverse().slice(0, 30);
  const direction = p => p.bond ? (p.outgoing ? "staked by you" : "staked with you") : (p.outgoing ? "paid" : "earned") + (p.aggregate ? " (aggregate)" : "");
  h += `<h2>Recent payments</h2>` + (recent.length ? table(["Job", "Replica#", "Kind", "Direction", "Peer", "State", "Amount#", "Fee#", "Updated", "Note"], recent.map(p =>
    `<tr data-state="${esc(p.state)}" data-kind="${esc(payKind(p))}"><td>${idCell(p.job)}</td><td class="num">${p.replica}</td><td>${esc(payKind(p))}</td><td>${esc(direction(p))}</td>` +
    `<td>${idCell(p.peer)}</td><td>${chip(p.state)}</td><td class="num">${msat(p.amount_msat)}</td><td class="num">${msat(p.fee_msat)}</td><td>${esc(ago(p.updated))}</td>` +
    `<td class="muted">${esc(payNote(p))}</td></tr>`), "payments") : empty("No payments."));
  return h;
}

function training(s) {
  if (!s.training.length) return empty("No training runs: infernet train MODULE --reduce MODULE --eval MODULE");
  let h = "";
  for (const t of [...s.training].reverse()) {
    const terms = t.terms || {};
    const done = t.rounds.filter(r => !zeroTime(r.finished));
    h += `<div class="job training" data-id="${esc(t.id)}" data-state="${esc(t.state)}"><div class="head">${idCell(t.id)} ${chip(t.state)} ` +
      `<span><b>${done.length}</b> of ${terms.rounds || "?"} rounds</span><span>${terms.shards || "?"} shards a round</span>` +
      `${t.error ? `<span class="muted">${esc(t.error)}</span>` : ""}</div>`;
    const names = [...new Set(done.flatMap(r => Object.keys(r.metrics || {})))].sort();
    // A metric the same every round (a count of examples) is left out of the charts.
    const charted = names.filter(n => new Set(done.map(r => (r.metrics || {})[n])).size > 1 || done.length === 1);
    h += `<div class="charts">`;
    for (const n of charted) {
      const pts = done.map((r, i) => ({ x: i + 1, y: (r.metrics || {})[n] })).filter(p => p.y !== undefined);
      h += `<div>` + lineChart([{ name: n, points: pts }], { name: n, title: `${n} per round`, fit: true, xInteger: true, xTicks: Math.min(10, Math.max(1, done.length - 1)), xFormat: x => "round " + x, height: 180 }) + `</div>`;
    }
    h += `</div>`;
    // A round the run ended in without finishing it ended with the run:
    // failed (or cancelled), not running, and took until the run's end.
    const live = t.state === "running" || t.state === "pending";
    const roundState = r => !zeroTime(r.finished) ? chip("done") : live ? chip("running") : chip(t.state);
    const roundEnd = r => zeroTime(r.finished) && !live ? t.finished : r.finished;
    h += table(["Round#", "State", "Took#", "State size#", "Report"], t.rounds.map((r, i) =>
      `<tr data-round="${i + 1}"><td class="num">${i + 1}</td><td>${roundState(r)}</td><td class="num">${esc(dur(r.started, roundEnd(r)))}</td>` +
      `<td class="num">${r.state_size !== undefined && !zeroTime(r.finished) ? bytes(r.state_size) : ""}</td><td><pre class="report">${esc(r.report || "")}</pre></td></tr>`), "rounds");
    h += `</div>`;
  }
  return h;
}

// ---- wiring ----

function current() { const p = location.hash.replace(/^#\//, ""); return pages[p] ? p : "status"; }

function render() {
  const name = current(), main = document.getElementById("page");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.dataset.page === name);
  if (!snap) return;
  document.getElementById("node-id").textContent = snap.node.id;
  try {
    main.innerHTML = pages[name](snap);
  } catch (e) {
    main.innerHTML = `<div class="empty">This page could not be drawn: ${esc(e)}</div>`;
    console.error(e);
  }
  main.dataset.page = name;
  main.dataset.snapshot = snap.time;
  main.dataset.ready = "true";
}

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("events");
  es.addEventListener("snapshot", e => { snap = JSON.parse(e.data); render(); });
  es.onopen = () => { live.textContent = "live"; live.classList.remove("off"); };
  es.onerror = () => { live.textContent = "reconnecting"; live.classList.add("off"); };
}

window.addEventListener("hashchange", render);
connect();
render();
