// The console's Informer (web/console/js/api.js) against a scripted fetch, in Node: it lists in
// pages, follows the watch from the list's revision, resumes after a dropped stream from the
// last revision it saw, and lists again after a 410.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Api, Informer } from '../../web/console/js/api.js';

const job = (name, rv) => ({ metadata: { namespace: 'ns', name, resourceVersion: String(rv) } });
const lines = (...events) => new Response(events.map((e) => `${JSON.stringify(e)}\n`).join(''));

/** A fetch that answers each request with the next scripted answer, and records the URLs. */
function scripted(answers) {
  const urls = [];
  globalThis.fetch = async (url) => {
    urls.push(String(url));
    const next = answers.shift();
    if (!next) return new Promise(() => {});  // no more: the watch hangs (until aborted)
    return typeof next === 'function' ? next() : next;
  };
  return urls;
}

const until = async (ok) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(ok());
};

test('lists in pages, then follows the watch from the list revision and resumes after a drop', async () => {
  const urls = scripted([
    Response.json({ metadata: { resourceVersion: '10', continue: 'c1' }, items: [job('a', 5)] }),
    Response.json({ metadata: { resourceVersion: '10' }, items: [job('b', 7)] }),
    lines({ type: 'ADDED', object: job('c', 11) }, { type: 'MODIFIED', object: job('a', 12) }),
    lines({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } },
      { type: 'DELETED', object: job('b', 16) }),
  ]);
  const inf = new Informer(new Api('t'), '/apis/gpucloud/v1/jobs', { batchMs: 0, pageSize: 1 }).start();
  await until(() => urls.length >= 5);
  inf.stop();
  assert.match(urls[0], /jobs\?limit=1$/);
  assert.match(urls[1], /limit=1&continue=c1$/);
  assert.match(urls[2], /watch=true.*resourceVersion=10$/);
  assert.match(urls[3], /resourceVersion=12$/);  // the stream ended: resumed after the last event
  assert.match(urls[4], /resourceVersion=16$/);  // a bookmark's revision counts too
  assert.deepEqual([...inf.items.keys()].sort(), ['ns/a', 'ns/c']);
  assert.equal(inf.items.get('ns/a').metadata.resourceVersion, '12');
});

test('a 410 lists again from scratch, dropping what the new list lacks', async () => {
  const urls = scripted([
    Response.json({ metadata: { resourceVersion: '10' }, items: [job('a', 5), job('gone', 6)] }),
    new Response('{"code":410}', { status: 410 }),
    Response.json({ metadata: { resourceVersion: '40' }, items: [job('a', 30)] }),
  ]);
  const inf = new Informer(new Api('t'), '/p', { batchMs: 0 }).start();
  await until(() => urls.length >= 4);
  inf.stop();
  assert.match(urls[2], /^\/p\?limit=/);
  assert.match(urls[3], /resourceVersion=40$/);
  assert.deepEqual([...inf.items.keys()], ['ns/a']);
});

for (const [status, message] of [[403, 'user alice may not jobs:List'], [401, 'a valid bearer token is required'],
  [400, 'labelSelector: bad term "team=="']]) {
  test(`a ${status} stops the informer (no retries) and keeps the error for the page`, async () => {
    const urls = scripted([Response.json({ reason: 'Refused', message }, { status })]);
    const inf = new Informer(new Api('t'), '/p', { batchMs: 0 }).start();
    await until(() => inf.error);
    assert.equal(inf.error.status, status);
    assert.equal(inf.error.message, message);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(urls.length, 1);
  });
}

test('a watch ERROR other than 410 is retried after a pause, from the same revision', async () => {
  const urls = scripted([
    Response.json({ metadata: { resourceVersion: '10' }, items: [] }),
    lines({ type: 'ERROR', object: { code: 500, message: 'store unavailable' } }),
  ]);
  const inf = new Informer(new Api('t'), '/p', { batchMs: 0 }).start();
  await until(() => urls.length >= 3);
  inf.stop();
  assert.match(urls[2], /watch=true.*resourceVersion=10$/);
  assert.equal(inf.error, undefined);
});
