// @ts-check
// A node: its GPUs with health, risk and samples, each MIG GPU's layout drawn on its eight
// memory slices, the topology matrix, the tasks placed on it, and cordon, uncordon and drain
// for those whose policies allow them.
import { API } from './api.js';
import { h, clear, kv, ago, num, table } from './dom.js';

/** Memory slices (of 8) a MIG profile takes: "3g.40gb" takes 4. @param {string} profile */
export function sliceWidth(profile) {
  const g = Number(/^(\d+)g/.exec(profile)?.[1] || 1);
  return g === 7 ? 8 : g === 3 ? 4 : g;
}

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main @param {string[]} args */
export function render(ctx, main, args) {
  const [name] = args;
  const path = `${API}/nodes/${encodeURIComponent(name)}`;
  const resource = `gpucloud:node/${name}`;
  const body = h('div');
  const buttons = [['cordon', 'nodes:Cordon', 'Cordon'], ['uncordon', 'nodes:Uncordon', 'Uncordon'],
    ['drain', 'nodes:Drain', 'Drain']].map(([verb, action, label]) => {
    const b = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'secondary',
      hidden: true }, label));
    ctx.api.can(action, resource).then((ok) => { b.hidden = !ok; });
    b.addEventListener('click', async () => {
      try {
        await ctx.api.call('POST', `${path}/${verb}`);
        ctx.announce(`${name}: ${verb} done`);
      } catch (e) {
        ctx.showError(e);
      }
    });
    return b;
  });
  main.append(h('h1', null, `Node ${name}`), h('div', { class: 'actions' }, ...buttons), body);

  function draw() {
    const n = ctx.nodes.items.get(name);
    clear(body);
    if (!n) {
      body.append(h('p', null, ctx.nodes.synced ? 'No such node.' : 'Loading…'));
      return;
    }
    const s = n.status || {};
    body.append(kv([
      ['Ready', s.ready ? 'yes' : `no (${s.readyReason || ''}: ${s.readyMessage || ''})`],
      ['Scheduling', n.spec?.unschedulable ? 'cordoned' : 'schedulable'],
      ['Pool', n.spec?.pool || '—'], ['Address', s.address || ''],
      ['Driver', `${s.driverVersion || ''} (CUDA ${s.cudaVersion || ''}, ${s.backend || ''})`],
      ['Last heartbeat', s.lastHeartbeatMs ? `${ago(s.lastHeartbeatMs)} ago` : '—'],
    ]));
    body.append(h('h2', null, 'GPUs'), table(`GPUs of ${name}`, ['GPU', 'Type', 'Health',
      'Utilization', 'Memory', 'MIG layout'], (s.gpus || []).map((/** @type {any} */ g) => [
      g.index, g.type,
      h('span', { class: g.healthy === false ? 'bad' : g.atRisk ? 'warn' : 'ok' },
        g.healthy === false ? `unhealthy${g.reason ? `: ${g.reason}` : ''}` :
          g.atRisk ? `at risk${g.risk ? `: ${g.risk}` : ''}` : 'healthy'),
      g.utilization !== undefined ? `${g.utilization}%` : '—',
      g.memoryTotalMiB ? `${num((g.memoryUsedMiB || 0) / 1024)} / ${num(g.memoryTotalMiB / 1024)} GiB` : '—',
      g.migEnabled ? migLayout(g.migLayout || []) : '—'])));
    const topo = s.gpuTopology || [];
    if (topo.length) {
      body.append(h('h2', null, 'Topology'), table('GPU topology matrix',
        ['', ...topo.map((/** @type {any} */ _r, /** @type {number} */ i) => `GPU${i}`)],
        topo.map((/** @type {string[]} */ r, /** @type {number} */ i) => [`GPU${i}`, ...r])));
    }
    const tasks = [];
    for (const j of ctx.jobs.items.values()) {
      for (const p of j.status?.placement || []) {
        if (p.node !== name) continue;
        tasks.push([h('a', { href: `#/job/${encodeURIComponent(j.metadata.namespace)}/${encodeURIComponent(j.metadata.name)}` },
          `${j.metadata.namespace}/${j.metadata.name}`), p.rank, j.status.phase,
        (p.gpus || []).map((/** @type {any} */ g) => g.index).join(', ')]);
      }
    }
    body.append(h('h2', null, 'Tasks'), tasks.length ? table(`Tasks on ${name}`,
      ['Job', 'Rank', 'Phase', 'GPUs'], tasks) : h('p', { class: 'muted' }, 'No task you may see runs here.'));
  }
  /** The MIG instances over the GPU's 8 memory slices. @param {{profile: string, start: number}[]} layout */
  function migLayout(layout) {
    const bar = h('div', { class: 'mig', role: 'img', 'aria-label': `MIG layout: ${
      layout.map((m) => `${m.profile} at slice ${m.start}`).join(', ') || 'no instances'}` });
    const sorted = [...layout].sort((a, b) => a.start - b.start);
    let at = 0;
    const cell = (/** @type {number} */ w, /** @type {string} */ text, /** @type {boolean} */ free) => {
      const c = h('div', { class: `slice${free ? ' free' : ''}` }, text);
      c.style.width = `${w * 24}px`;
      return c;
    };
    for (const m of sorted) {
      if (m.start > at) bar.append(cell(m.start - at, '', true));
      const w = sliceWidth(m.profile);
      bar.append(cell(w, m.profile, false));
      at = m.start + w;
    }
    if (at < 8) bar.append(cell(8 - at, '', true));
    return bar;
  }
  const offs = [ctx.nodes.subscribe(draw), ctx.jobs.subscribe(draw)];
  ctx.api.get(path).then((n) => {  // the freshest samples, and a 403 or 404 said plainly
    if (ctx.nodes.items.has(name)) ctx.nodes.items.set(name, n);
    draw();
  }, (e) => ctx.showError(e));
  draw();
  return () => offs.forEach((f) => f());
}
