// The console's pure functions (web/console/js/model.js) in Node, without a browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { filterJobs, gpuTypes, gpusOf, manifestErrors, queueUsage } from '../../web/console/js/model.js';

const gpu = (index, type, extra = {}) => ({ index, type, healthy: true, ...extra });
const node = (name, gpus, extra = {}) => ({ metadata: { name }, spec: {},
  status: { ready: true, gpus, ...extra } });
const job = (ns, name, phase, extra = {}) => ({ metadata: { namespace: ns, name },
  spec: { queue: extra.queue || 'default', tasks: extra.tasks || [] },
  status: { phase, submittedMs: extra.submittedMs || 0, ...extra.status } });

test('gpuTypes counts GPUs, health, risk and utilization by type, allocation from the summary', () => {
  const nodes = [node('a', [gpu(0, 'H100', { utilization: 50 }), gpu(1, 'H100', { healthy: false })]),
    node('b', [gpu(0, 'A100', { atRisk: true, utilization: 10 })])];
  const t = gpuTypes(nodes, { gpus: { H100: { total: 2, allocated: 1.5 } } });
  assert.deepEqual([...t.keys()], ['A100', 'H100']);
  assert.deepEqual(t.get('H100'), { total: 2, allocated: 1.5, unhealthy: 1, atRisk: 0, utilization: 50, measured: 1 });
  assert.equal(t.get('A100').atRisk, 1);
  assert.equal(t.get('A100').allocated, 0);
});

test('filterJobs filters by phase, queue, namespace and name, newest first', () => {
  const jobs = [job('a', 'one', 'Running', { submittedMs: 1 }), job('a', 'two', 'Pending', { submittedMs: 3 }),
    job('b', 'three', 'Running', { submittedMs: 2, queue: 'q' })];
  assert.deepEqual(filterJobs(jobs, {}).map((j) => j.metadata.name), ['two', 'three', 'one']);
  assert.deepEqual(filterJobs(jobs, { phase: 'Running' }).map((j) => j.metadata.name), ['three', 'one']);
  assert.deepEqual(filterJobs(jobs, { queue: 'q' }).map((j) => j.metadata.name), ['three']);
  assert.deepEqual(filterJobs(jobs, { namespace: 'a', text: 'tw' }).map((j) => j.metadata.name), ['two']);
});

test('gpusOf adds replicas times GPUs per task', () => {
  assert.equal(gpusOf({ spec: { tasks: [{ replicas: 2, resources: { gpu: { count: 4 } } },
    { resources: { gpu: { count: 1 } } }] } }), 9);
  assert.equal(gpusOf({ spec: { tasks: [{ command: ['x'] }] } }), 0);
});

test('manifestErrors reads the line and column of each validator error', () => {
  assert.deepEqual(manifestErrors('body:8:15: spec.tasks[0].replicas: must be >= 1, got -2\nbody:3:1: x: bad'),
    [{ line: 8, column: 15, text: 'spec.tasks[0].replicas: must be >= 1, got -2' },
      { line: 3, column: 1, text: 'x: bad' }]);
  assert.deepEqual(manifestErrors('a job needs a name'), [{ line: 0, column: 0, text: 'a job needs a name' }]);
});

test('queueUsage: guarantee, max, use by type (else the wildcard row) and pending GPUs', () => {
  const queues = [{ metadata: { name: 'nlp' }, spec: { quota: [{ gpuType: 'H100', guaranteed: '8', max: '16' },
    { gpuType: '*', guaranteed: '2' }] } }];
  const run = (name, byType, phase = 'Running') => job('x', name, phase,
    { queue: 'nlp', status: { gpusByType: byType }, tasks: [{ resources: { gpu: { count: 3 } } }] });
  const u = queueUsage(queues, [run('a', { H100: 10 }), run('b', { A100: 1 }), run('c', {}, 'Pending')]);
  assert.deepEqual(u.get('nlp').get('H100'), { guaranteed: 8, max: 16, used: 10, pending: 0 });
  assert.deepEqual(u.get('nlp').get('*'), { guaranteed: 2, max: null, used: 1, pending: 3 });
});
