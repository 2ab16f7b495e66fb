// @ts-check
// Queues: guarantee, maximum, usage and borrowed capacity per GPU type, fair-share standing,
// the GPUs waiting; and, for a job shape, whether it could start now on the free GPUs.
import { h, clear, num, table } from './dom.js';
import { fitNow, queueUsage } from './model.js';

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  const body = h('section', { 'aria-label': 'Queues' });
  const count = /** @type {HTMLInputElement} */ (h('input', { id: 'fit-count', type: 'number', min: '1', value: '8' }));
  const type = /** @type {HTMLSelectElement} */ (h('select', { id: 'fit-type' }));
  const perNode = /** @type {HTMLInputElement} */ (h('input', { id: 'fit-per-node', type: 'number', min: '0', value: '0' }));
  const answer = h('p', { role: 'status', id: 'fit-answer' });
  const form = h('form', { class: 'filters', 'aria-label': 'Could it start now?' },
    h('label', { for: 'fit-count' }, 'GPUs'), count,
    h('label', { for: 'fit-type' }, 'Type'), type,
    h('label', { for: 'fit-per-node' }, 'At most per node (0: any)'), perNode,
    h('button', { type: 'submit' }, 'Could it start now?'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    ask();
  });
  main.append(h('h1', null, 'Queues'), body, h('h2', null, 'Could a job start now?'), form, answer,
    h('p', { class: 'muted' }, 'Counted over the whole free GPUs of Ready, schedulable nodes as ' +
      'this page sees them; the scheduler also weighs quotas, priorities and topology. A pending ' +
      'job\'s own reason is on its page.'));

  function ask() {
    const r = fitNow(ctx.nodes.items.values(), ctx.jobs.items.values(),
      { count: Number(count.value), type: type.value, perNode: Number(perNode.value) });
    answer.textContent = r.fits ?
      `Yes: ${r.picks.map((p) => `${p.gpus} on ${p.node}`).join(', ')}.` :
      `Not now: ${r.totalFree} ${type.value || ''} GPUs are free` +
      `${Number(perNode.value) ? `, not ${perNode.value} together on enough nodes` : ''}; it waits ` +
      'for running jobs to end or for nodes to join.';
  }

  function draw() {
    const types = new Set();
    for (const n of ctx.nodes.items.values()) for (const g of n.status?.gpus || []) types.add(g.type);
    if (type.options.length !== types.size + 1) {
      clear(type);
      type.append(h('option', { value: '' }, 'any'), ...[...types].sort().map((t) => h('option', { value: t }, t)));
    }
    const usage = queueUsage(ctx.queues.items.values(), ctx.jobs.items.values());
    const rows = [];
    for (const [q, byType] of [...usage.entries()].sort()) {
      const weight = ctx.queues.items.get(q)?.spec?.weight ?? 1;
      for (const [t, u] of byType) {
        const borrowed = Math.max(0, u.used - u.guaranteed);
        rows.push([q, t, weight, num(u.guaranteed), u.max === null ? '—' : num(u.max), num(u.used),
          num(borrowed), u.guaranteed ? `${Math.round((u.used / u.guaranteed) * 100)}% of guarantee` :
            u.used ? 'borrowing only' : '—', num(u.pending)]);
      }
      if (byType.size === 0) rows.push([q, '*', weight, '0', '—', '0', '0', '—', '0']);
    }
    clear(body);
    body.append(rows.length ? table('Queues by GPU type', ['Queue', 'GPU type', 'Weight', 'Guaranteed',
      'Max', 'In use', 'Borrowed', 'Fair-share standing', 'GPUs pending'], rows,
    new Set([2, 3, 4, 5, 6, 8])) : h('p', { class: 'muted' }, 'No queue is defined: jobs go to "default".'));
  }
  const offs = [ctx.queues.subscribe(draw), ctx.jobs.subscribe(draw), ctx.nodes.subscribe(draw)];
  draw();
  return () => offs.forEach((f) => f());
}
