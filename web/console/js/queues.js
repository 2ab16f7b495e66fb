// @ts-check
// Queues: guarantee, maximum, usage and borrowed capacity per GPU type, fair-share standing,
// the GPUs waiting; and, for a job shape, the scheduler's answer to "could it start now, and if
// not, why and when" (a dry run with whatIf).
import { h, clear, num, table } from './dom.js';
import { queueUsage } from './model.js';

/** @param {import('./app.js').Ctx} ctx @param {HTMLElement} main */
export function render(ctx, main) {
  const body = h('section', { 'aria-label': 'Queues' });
  const replicas = /** @type {HTMLInputElement} */ (h('input', { id: 'fit-replicas', type: 'number', min: '1', value: '1' }));
  const count = /** @type {HTMLInputElement} */ (h('input', { id: 'fit-count', type: 'number', min: '0', value: '8' }));
  const type = /** @type {HTMLSelectElement} */ (h('select', { id: 'fit-type' }));
  const queue = /** @type {HTMLSelectElement} */ (h('select', { id: 'fit-queue' }));
  const answer = h('p', { role: 'status', id: 'fit-answer' });
  const form = h('form', { class: 'filters', 'aria-label': 'Could it start now?' },
    h('label', { for: 'fit-replicas' }, 'Replicas'), replicas,
    h('label', { for: 'fit-count' }, 'GPUs per replica'), count,
    h('label', { for: 'fit-type' }, 'Type'), type,
    h('label', { for: 'fit-queue' }, 'Queue'), queue,
    h('button', { type: 'submit' }, 'Could it start now?'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    ask();
  });
  main.append(h('h1', null, 'Queues'), body, h('h2', null, 'Could a job start now?'), form, answer,
    h('p', { class: 'muted' }, 'Answered by the scheduler: one cycle over the cluster as it is ' +
      'now, with this job among the waiting ones (queues, fair share, reservations, ' +
      'preemption). Nothing is submitted.'));

  /** The scheduler's answer for the shape (POST jobs?dryRun=All&whatIf=true). */
  async function ask() {
    answer.textContent = 'Asking the scheduler…';
    const gpu = /** @type {Record<string, any>} */ ({ count: Number(count.value) });
    if (type.value) gpu.type = type.value;
    const job = { apiVersion: 'gpucloud/v1', kind: 'Job',
      metadata: { name: `whatif-${Math.random().toString(36).slice(2, 10)}` },
      spec: { queue: queue.value || 'default', tasks: [{ name: 'main',
        replicas: Number(replicas.value), command: ['true'], resources: { gpu } }] } };
    try {
      const out = await ctx.api.call('POST', `${ctx.jobsPath(ctx.who.namespace || 'default')}` +
        '?dryRun=All&whatIf=true', { body: JSON.stringify(job), contentType: 'application/json' });
      const w = out.status?.whatIf || {};
      answer.textContent = w.outcome === 'Bind' ? `Yes, now: on ${w.nodes.join(', ')}.` :
        w.outcome === 'Reject' ? `Never on this cluster: ${w.reason}.` :
        `Not now: ${w.reason}${w.expectedStartMs ?
          ` (expected to start about ${new Date(w.expectedStartMs).toLocaleString()})` : ''}.`;
    } catch (e) {
      answer.textContent = '';
      ctx.showError(e);
    }
  }

  function draw() {
    const types = new Set();
    for (const n of ctx.nodes.items.values()) for (const g of n.status?.gpus || []) types.add(g.type);
    if (type.options.length !== types.size + 1) {
      clear(type);
      type.append(h('option', { value: '' }, 'any'), ...[...types].sort().map((t) => h('option', { value: t }, t)));
    }
    const names = [...ctx.queues.items.keys()].sort();
    if (queue.options.length !== Math.max(1, names.length)) {
      clear(queue);
      for (const q of names.length ? names : ['default']) queue.append(h('option', { value: q }, q));
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
