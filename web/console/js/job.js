// @ts-check
// A job: its ranks with their nodes and GPUs, its phase history and events, restarts and where
// it resumed from, GPU time and goodput, its logs live per rank and attempt, and cancel and
// delete for those whose policies allow them.
import { API, ApiError } from './api.js';
import { h, clear, kv, num, phaseBadge, table } from './dom.js';
import { gpusOf } from './model.js';

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main @param {string[]} args */
export function render(ctx, main, args) {
  const [ns, name] = args;
  const path = `${API}/namespaces/${encodeURIComponent(ns)}/jobs/${encodeURIComponent(name)}`;
  const resource = `gpucloud:job/${ns}/${name}`;
  const title = h('h1', null, `Job ${ns}/${name} `);
  const phase = h('span');
  title.append(phase);
  const cancelBtn = /** @type {HTMLButtonElement} */ (h('button', { type: 'button',
    class: 'secondary', disabled: true }, 'Cancel'));
  const deleteBtn = /** @type {HTMLButtonElement} */ (h('button', { type: 'button',
    class: 'danger', disabled: true }, 'Delete'));
  const summary = h('section', { 'aria-label': 'Summary' });
  const ranks = h('section', { 'aria-labelledby': 'h-ranks' });
  const events = h('section', { 'aria-labelledby': 'h-events' });
  const logs = h('section', { 'aria-labelledby': 'h-logs' });
  main.append(title, h('div', { class: 'actions' }, cancelBtn, deleteBtn), summary,
    h('h2', { id: 'h-ranks' }, 'Ranks'), ranks,
    h('h2', { id: 'h-events' }, 'Events'), events,
    h('h2', { id: 'h-logs' }, 'Logs'), logs);
  let alive = true;
  /** @type {any} */
  let job = null;

  ctx.api.can('jobs:Cancel', resource).then((ok) => {
    cancelBtn.disabled = !ok;
    if (!ok) cancelBtn.title = 'Your policies do not allow jobs:Cancel on this job';
  });
  ctx.api.can('jobs:Delete', resource).then((ok) => {
    deleteBtn.disabled = !ok;
    if (!ok) deleteBtn.title = 'Your policies do not allow jobs:Delete on this job';
  });
  cancelBtn.addEventListener('click', () => act('POST', `${path}/cancel`, 'cancel requested'));
  deleteBtn.addEventListener('click', () => {
    if (confirm(`Delete job ${ns}/${name}?`)) act('DELETE', path, 'deleted');
  });
  /** @param {string} method @param {string} url @param {string} done */
  async function act(method, url, done) {
    try {
      await ctx.api.call(method, url);
      ctx.announce(`Job ${name}: ${done}`);
    } catch (e) {
      ctx.showError(e);
    }
  }

  function draw() {
    if (!job) return;
    const s = job.status || {};
    clear(phase);
    phase.append(phaseBadge(s.phase || 'Pending'));
    const end = ['Succeeded', 'Failed', 'Cancelled'].includes(s.phase);
    cancelBtn.hidden = end;
    const gs = s.gpuSeconds || {};
    clear(summary);
    summary.append(kv([
      ['Queue', job.spec?.queue || 'default'], ['Priority', String(job.spec?.priority ?? 0)],
      ['Reason', `${s.reason || ''}${s.message ? `: ${s.message}` : ''}`],
      ['Attempt', `${s.attempt || 0} (restarts ${s.restarts || 0}, interruptions ${s.interruptions || 0})`],
      ['Resumes from', s.checkpointDir ? `${s.checkpointDir}${s.lastCheckpointMs ?
        ` (last checkpoint ${new Date(s.lastCheckpointMs).toLocaleString()})` : ''}` : '—'],
      ['GPUs', `${num(gpusOf(job))} requested${s.gpus ? `; holds ${Object.entries(s.gpusByType || {})
        .map(([t, n]) => `${num(Number(n))} ${t}`).join(', ')}` : ''}`],
      ['GPU time', gs.allocated !== undefined ? `${num(gs.allocated / 3600, 2)} GPU-h allocated, ` +
        `${num((gs.productive || 0) / 3600, 2)} productive, ${num((gs.lost || 0) / 3600, 2)} lost` : '—'],
      ['Goodput', gs.allocated ? `${((gs.productive || 0) / gs.allocated * 100).toFixed(1)}%` : '—'],
      ['Cost', s.costUsd ? `$${Object.values(s.costUsd).reduce((a, b) => a + Number(b), 0).toFixed(2)}` +
        ` (${Object.keys(s.costUsd).join(', ')})` : '—'],
    ]));
    clear(ranks);
    const placement = s.placement || [];
    ranks.append(placement.length === 0 ? h('p', { class: 'muted' }, 'Not placed.') :
      table('Ranks', ['Rank', 'Task', 'Node', 'GPUs', 'State'], placement.map((/** @type {any} */ p) => [
        p.rank, p.task,
        h('a', { href: `#/node/${encodeURIComponent(p.node)}` }, p.node),
        (p.gpus || []).map((/** @type {any} */ g) => `${g.index}${g.mode && g.mode !== 'whole' ?
          ` (${g.migProfile || g.mode}${g.fractionMilli ? ` ${g.fractionMilli / 1000}` : ''})` : ''}`).join(', '),
        (s.tasks || {})[p.name] || ''])));
    logControls(s);
  }

  let lastEvents = 0;
  async function loadEvents() {
    lastEvents = performance.now();
    try {
      const list = await ctx.api.get(`${path}/events`);
      if (!alive) return;
      clear(events);
      events.append(table('Events', ['Time', 'Type', 'Reason', 'Message'],
        (list.items || []).map((/** @type {any} */ e) => [
          e.timestampMs ? new Date(e.timestampMs).toLocaleTimeString() : '', e.type, e.reason, e.message])));
    } catch (e) {
      /* shown by the job's own error */
    }
  }

  // ---- logs: a rank and an attempt, followed while the job runs ----
  const rankSel = /** @type {HTMLSelectElement} */ (h('select', { id: 'log-rank' }));
  const attemptSel = /** @type {HTMLSelectElement} */ (h('select', { id: 'log-attempt' }));
  const pre = h('pre', { class: 'logs', tabindex: '0', role: 'log', 'aria-label': 'Log output',
    'aria-live': 'off' });
  logs.append(h('div', { class: 'filters' }, h('label', { for: 'log-rank' }, 'Rank'), rankSel,
    h('label', { for: 'log-attempt' }, 'Attempt'), attemptSel), pre);
  /** @type {AbortController | null} */
  let follow = null;
  let shown = '';
  /** @param {any} s */
  function logControls(s) {
    const ranksN = Math.max(1, (s.placement || []).length);
    const attempts = Math.max(1, s.attempt || 1);
    const want = `${ranksN}/${attempts}`;
    if (rankSel.dataset.n === want) return;
    const keepRank = rankSel.value || '0';
    rankSel.dataset.n = want;
    clear(rankSel);
    clear(attemptSel);
    for (let r = 0; r < ranksN; r++) rankSel.append(h('option', { value: r, selected: String(r) === keepRank }, r));
    for (let a = attempts; a >= 1; a--) attemptSel.append(h('option', { value: a }, a));
    startLogs();
  }
  rankSel.addEventListener('change', startLogs);
  attemptSel.addEventListener('change', startLogs);
  function startLogs() {
    const key = `${rankSel.value}/${attemptSel.value}`;
    if (key === shown && follow) return;
    shown = key;
    if (follow) follow.abort();
    follow = new AbortController();
    clear(pre);
    streamLogs(follow.signal, rankSel.value, attemptSel.value).catch(() => {});
  }
  /**
   * Follows one rank's log of one attempt from byte `offset` on, reconnecting (with back-off)
   * until the job has ended or a newer attempt began; a refusal is shown, not retried.
   * @param {AbortSignal} signal @param {string} rank @param {string} attempt
   */
  async function streamLogs(signal, rank, attempt) {
    let offset = 0;  // bytes of the log shown, as the server counts them
    let chars = 0;   // characters in the <pre>
    let backoff = 500;
    const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
    while (alive && !signal.aborted) {
      let res;
      try {
        res = await fetch(`${path}/logs?rank=${rank}&attempt=${attempt}&offset=${offset}&follow=true`,
          { headers: ctx.api.headers(), signal });
      } catch (e) {
        if (signal.aborted) return;
        await sleep(backoff = Math.min(backoff * 2, 5000));  // the network: try again
        continue;
      }
      if (res.status === 401 || res.status === 403) {
        ctx.showError(new ApiError(res.status, 'Forbidden', (await res.json().catch(() => ({}))).message ||
          'the logs are not yours to read'));
        return;
      }
      if (res.ok && res.body) {
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          offset += value.byteLength;  // the raw bytes: a resumed read starts where these end
          const text = decoder.decode(value, { stream: true });
          pre.append(text);
          chars += text.length;
          if (chars > 2e6) {  // keep the last megabyte in the page
            pre.textContent = (pre.textContent || '').slice(-1e6);
            chars = pre.textContent.length;
          }
          pre.scrollTop = pre.scrollHeight;
        }
        backoff = 500;
      }
      // Not there yet (404: the attempt has not started), a server error, or the end of a
      // follow (the server ends one when the attempt ends, or, for a job not yet started,
      // when it changes phase): go on from the offset until the job itself has ended.
      const s = job?.status || {};
      if (['Succeeded', 'Failed', 'Cancelled'].includes(s.phase) || Number(s.attempt) > Number(attempt)) return;
      await sleep(res.ok ? 500 : (backoff = Math.min(backoff * 2, 5000)));
    }
  }

  const key = `${ns}/${name}`;
  let seen = false;  // the watch has delivered the job (so its absence later is a delete)
  /** @type {ReturnType<typeof setTimeout> | null} */
  let trailing = null;
  function fromInformer() {
    const j = ctx.jobs.items.get(key);
    if (j && j !== job) {
      seen = true;
      job = j;
      draw();
      // Events at most once a second, and once more after the last change.
      if (performance.now() - lastEvents > 1000) loadEvents();
      if (trailing) clearTimeout(trailing);
      trailing = setTimeout(() => { if (alive) loadEvents(); }, 1100);
    } else if (!j && seen && ctx.jobs.synced) {
      ctx.announce(`Job ${name} was deleted`);
      ctx.go('#/jobs');
    }
  }
  const unsubscribe = ctx.jobs.subscribe(fromInformer);
  ctx.api.get(path).then((j) => {
    if (!alive) return;
    if (!job) {
      job = ctx.jobs.items.get(key) || j;
      draw();
    }
    loadEvents();
  }, (e) => {
    if (!alive) return;
    ctx.showError(e);
    if (e instanceof ApiError && (e.status === 403 || e.status === 404)) {
      cancelBtn.hidden = deleteBtn.hidden = true;
      clear(logs);
    }
  });
  return () => {
    alive = false;
    unsubscribe();
    if (follow) follow.abort();
    if (trailing) clearTimeout(trailing);
  };
}
