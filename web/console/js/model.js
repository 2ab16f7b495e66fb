// @ts-check
// Pure functions over API objects, shared by the pages (and unit-tested in Node:
// tests/console/model_test.mjs).

/**
 * GPUs by type: how many there are, allocated (from the cluster summary when there is one),
 * unhealthy, at risk, and the sum of utilization over the GPUs that report it.
 * @param {Iterable<any>} nodes @param {any} summary GET cluster's answer, or null
 */
export function gpuTypes(nodes, summary) {
  /** @type {Map<string, {total: number, allocated: number, unhealthy: number, atRisk: number,
   *   utilization: number, measured: number}>} */
  const out = new Map();
  const entry = (/** @type {string} */ t) => {
    let e = out.get(t);
    if (!e) {
      e = { total: 0, allocated: 0, unhealthy: 0, atRisk: 0, utilization: 0, measured: 0 };
      out.set(t, e);
    }
    return e;
  };
  for (const n of nodes) {
    for (const g of n.status?.gpus || []) {
      const e = entry(g.type || 'unknown');
      e.total++;
      if (g.healthy === false) e.unhealthy++;
      if (g.atRisk) e.atRisk++;
      if (typeof g.utilization === 'number') {
        e.utilization += g.utilization;
        e.measured++;
      }
    }
  }
  for (const [t, s] of Object.entries(summary?.gpus || {})) {
    const e = entry(t);
    e.allocated = s.allocated || 0;
    if (!e.total) e.total = s.total || 0;
  }
  return new Map([...out.entries()].sort());
}

/**
 * Jobs that pass the filters (phase, queue, namespace, a substring of the name), sorted newest
 * first. @param {Iterable<any>} jobs
 * @param {{phase?: string, queue?: string, namespace?: string, text?: string}} f
 */
export function filterJobs(jobs, f) {
  const out = [];
  for (const j of jobs) {
    const phase = j.status?.phase || 'Pending';
    if (f.phase && phase !== f.phase) continue;
    if (f.queue && (j.spec?.queue || 'default') !== f.queue) continue;
    if (f.namespace && j.metadata.namespace !== f.namespace) continue;
    if (f.text && !j.metadata.name.includes(f.text)) continue;
    out.push(j);
  }
  out.sort((a, b) => (b.status?.submittedMs || 0) - (a.status?.submittedMs || 0) ||
    (a.metadata.name < b.metadata.name ? -1 : 1));
  return out;
}

/** GPUs a job asks for in all. @param {any} job */
export function gpusOf(job) {
  let n = 0;
  for (const t of job.spec?.tasks || []) {
    const g = t.resources?.gpu || {};
    const each = g.count ?? (g.fraction ? Number(g.fraction) : g.mig ? 1 : 0);
    n += each * (t.replicas || 1);
  }
  return n;
}

/**
 * The errors of a 422 answer with the manifest lines they name ("body:8:15: spec...: why").
 * @param {string} message @returns {{line: number, column: number, text: string}[]}
 */
export function manifestErrors(message) {
  return message.split('\n').filter((l) => l.trim()).map((l) => {
    const m = /^(?:[^:\s]*):(\d+):(\d+): (.*)$/.exec(l);
    return m ? { line: Number(m[1]), column: Number(m[2]), text: m[3] } :
      { line: 0, column: 0, text: l };
  });
}

/**
 * Per queue and GPU type: guaranteed, max, used (by the queue's running and scheduled jobs) and
 * borrowed (used past the guarantee). @param {Iterable<any>} queues @param {Iterable<any>} jobs
 */
export function queueUsage(queues, jobs) {
  /** @type {Map<string, Map<string, {guaranteed: number, max: number | null, used: number,
   *   pending: number}>>} */
  const out = new Map();
  const row = (/** @type {string} */ q, /** @type {string} */ t) => {
    let m = out.get(q);
    if (!m) out.set(q, m = new Map());
    let r = m.get(t);
    if (!r) m.set(t, r = { guaranteed: 0, max: null, used: 0, pending: 0 });
    return r;
  };
  for (const q of queues) {
    if (!out.has(q.metadata.name)) out.set(q.metadata.name, new Map());
    for (const quota of q.spec?.quota || []) {
      const r = row(q.metadata.name, quota.gpuType || '*');
      r.guaranteed = Number(quota.guaranteed || 0);
      r.max = quota.max === undefined ? null : Number(quota.max);
    }
  }
  for (const j of jobs) {
    const q = j.spec?.queue || 'default';
    const phase = j.status?.phase;
    if (phase === 'Pending') row(q, '*').pending += gpusOf(j);
    if (phase !== 'Running' && phase !== 'Scheduled') continue;
    for (const [t, n] of Object.entries(j.status?.gpusByType || {})) {
      const m = out.get(q);
      // A quota row for the type if the queue has one, else its wildcard row.
      row(q, m && m.has(t) ? t : '*').used += Number(n);
    }
  }
  return out;
}
