// The shared mailbox scenario (SPEC section 5), run once per transport and
// client profile. Steps run in order and build on each other's state; the
// first failing step is the informative one.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AGENTS, HUMAN, closeWorld, createWorld, runCli } from './harness.mjs';
import { STRINGIFIED_ACCEPTED, declaredArrayArgs } from './profiles.mjs';

const TOOLS = ['add_message', 'list_messages', 'get_message', 'archive_message', 'mark_read', 'list_concepts',
  'unarchive_message', 'mark_unread', 'delete_message', 'retract_message', 'mailbox_status'];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/;
const FAKE = 'MESSAGE:01J0000000000000000000FAKE';

const ids = (list) => list.messages.map((m) => m.messageId);
const rowOf = (list, id) => list.messages.find((m) => m.messageId === id);
const sorted = (a) => [...a].sort();

function assertIsoTime(v, what) {
  assert.equal(typeof v, 'string', `${what} must be a timestamp string, got ${JSON.stringify(v)}`);
  assert.match(v, ISO, `${what}: ${v}`);
  assert.ok(!Number.isNaN(Date.parse(v)), `${what} does not parse: ${v}`);
}

async function waitFor(fn, what, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function scenario(transport, profileName, { env = {} } = {}) {
  describe(`mailbox scenario [${transport} / ${profileName}]`, () => {
    let w;
    let alice, bob, carol, mallory, hank;
    const m = {}; // message receipts by label
    const inbox = (a, extra = {}) => a.ok('list_messages', { limit: 200, ...extra });

    before(async () => {
      w = await createWorld({ transport, profileName, env });
      ({ alice, bob, carol, mallory } = w.agents);
      hank = w.agents[HUMAN];
    });
    after(async () => {
      if (w) await closeWorld(w);
    });

    it('tools/list publishes every tool with input and output schemas', async () => {
      for (const a of AGENTS) {
        const tools = await w.agents[a].listTools();
        const names = tools.map((t) => t.name);
        for (const t of TOOLS) assert.ok(names.includes(t), `${a}: tools/list lacks ${t} (has ${names})`);
        for (const t of tools.filter((x) => TOOLS.includes(x.name))) {
          assert.equal(t.inputSchema?.type, 'object', `${t.name}: inputSchema.type`);
          assert.equal(t.outputSchema?.type, 'object', `${t.name}: outputSchema.type`);
        }
      }
      const mr = alice.tools.mark_read.inputSchema.properties;
      const branches = mr.messageId?.anyOf;
      assert.ok(Array.isArray(branches) && branches.length === 2, `mark_read.messageId must be anyOf with exactly two branches: ${JSON.stringify(mr.messageId)}`);
      const types = sorted(branches.map((b) => b.type));
      assert.deepEqual(types, ['array', 'string'], 'mark_read.messageId branches');
      const arr = branches.find((b) => b.type === 'array');
      assert.equal(arr.items?.type, 'string', 'mark_read.messageId array items');
      for (const b of branches) {
        const extra = Object.keys(b).filter((k) => !['type', 'items', 'description', 'minLength', 'minItems', 'maxItems', 'title'].includes(k));
        assert.deepEqual(extra, [], `mark_read.messageId branch has unexpected keywords: ${JSON.stringify(b)}`);
      }
      assert.equal(mr.all?.type, 'boolean', 'mark_read.all');
      // The profile under test stringifies exactly the accepted declared arrays.
      for (const [tool, args] of Object.entries(STRINGIFIED_ACCEPTED)) {
        const declared = declaredArrayArgs(alice.tools[tool].inputSchema);
        for (const a of args) assert.ok(declared.includes(a), `${tool}.${a} is not declared as an array`);
      }
    });

    it('direct mail: receipt, recipient inbox, sender outbox', async () => {
      m.m1 = await alice.ok('add_message', {
        to: ['@bob'],
        subject: 'Handoff: POL-358 schema migration',
        body: 'Bob, the schema migration for POL-358 is half done; the unbalanced "quote in config.yaml needs a look.',
      });
      assert.match(m.m1.messageId, /^MESSAGE:.+/);
      assert.match(m.m1.threadId, /^THREAD:.+/);
      assert.equal(m.m1.status, 'sent');
      assert.equal(m.m1.recipientCount, 1);
      assert.equal(m.m1.priority, 'normal');
      assert.equal(m.m1.durable, true);
      assertIsoTime(m.m1.sentAt, 'sentAt');

      const bi = await inbox(bob);
      const r = rowOf(bi, m.m1.messageId);
      assert.ok(r, 'bob inbox lacks the message');
      assert.equal(r.from, '@alice');
      assert.deepEqual(r.to, ['@bob']);
      assert.equal(r.subject, 'Handoff: POL-358 schema migration');
      assert.equal(r.priority, 'normal');
      assert.equal(r.readAt, null);
      assert.equal(r.archivedAt, null);
      assert.equal(r.retracted, false);
      assert.equal(r.threadId, m.m1.threadId);
      assert.equal(r.sentAt, m.m1.sentAt);
      assert.equal(bi.totalCount, bi.messages.length);
      assert.equal(bi.nextOffset, null);
      assert.equal(bi.watermark, bi.messages[0].messageId, 'watermark is the newest inbox message');

      const ao = await inbox(alice, { box: 'outbox' });
      const o = rowOf(ao, m.m1.messageId);
      assert.ok(o, 'alice outbox lacks the message');
      assert.equal(o.readAt, null);
      assert.ok(!ids(await inbox(alice)).includes(m.m1.messageId), 'a direct message is not in its sender inbox');
      assert.ok(!ids(await inbox(carol)).includes(m.m1.messageId), 'carol sees bob mail');
      assert.ok((await inbox(alice, { box: 'all' })).messages.some((x) => x.messageId === m.m1.messageId), 'box:all includes sent mail');
    });

    it('address forms resolve to canonical addresses', async () => {
      m.m2 = await alice.ok('add_message', { to: ['bob', 'AGENT:@carol', `human:${HUMAN}`], subject: 'Three ways to say a name', body: 'Addressed by bare name, typed id and human login.' });
      assert.equal(m.m2.recipientCount, 3);
      const g = await alice.ok('get_message', { messageId: m.m2.messageId });
      assert.deepEqual(sorted(g.to), sorted(['@bob', '@carol', `human:${HUMAN}`]));
      m.m3 = await alice.ok('add_message', { to: 'AGENT:bob', subject: 'Scalar address', body: 'to given as one string' });
      assert.equal(m.m3.recipientCount, 1);
      assert.deepEqual(rowOf(await inbox(bob), m.m3.messageId)?.to, ['@bob']);
      m.self = await alice.ok('add_message', { to: '@me', subject: 'Note to self', body: 'remember the release checklist' });
      const ai = await inbox(alice);
      assert.deepEqual(rowOf(ai, m.self.messageId)?.to, ['@alice']);
      assert.equal(rowOf(ai, m.self.messageId)?.from, '@alice');
      if (hank) {
        const hi = await inbox(hank);
        assert.deepEqual(ids(hi), [m.m2.messageId], 'the human sees exactly the mail sent to them');
        assert.equal(hi.messages[0].from, '@alice');
      }
    });

    it('bad sends are specific errors and store nothing', async () => {
      const before = (await inbox(bob)).totalCount;
      const outBefore = (await inbox(alice, { box: 'outbox' })).totalCount;
      await alice.fails('add_message', { to: '@nobody', subject: 's', body: 'b' }, /Unknown recipient: @nobody/);
      await alice.fails('add_message', { to: ['@bob', 'nobody'], subject: 's', body: 'b' }, /Unknown recipient: @nobody/);
      await alice.fails('add_message', { to: 'human:nobody', subject: 's', body: 'b' }, /human:nobody/);
      await alice.fails('add_message', { to: [], subject: 's', body: 'b' }, /\bto\b/);
      await alice.fails('add_message', { to: '@bob', subject: 'x'.repeat(201), body: 'b' }, /subject/i);
      await alice.fails('add_message', { to: '@bob', subject: 'lone surrogate \ud800', body: 'b' }, /UTF-8|surrogate|subject/i);
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', priority: 'urgent' }, /priority/);
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', inReplyTo: FAKE }, `Message not found: ${FAKE}`);
      assert.equal((await inbox(bob)).totalCount, before, 'a failed send reached bob');
      assert.equal((await inbox(alice, { box: 'outbox' })).totalCount, outBefore, 'a failed send is in the outbox');
    });

    it('anti-spoof: identity-override keys are rejected before validation', async () => {
      const before = (await inbox(bob)).totalCount;
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', from: '@carol' },
        "Identity-override spoof rejected: 'from' is stamped by the server");
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', Sender_Id: 'carol' },
        /^Identity-override spoof rejected: 'Sender_Id' is stamped by the server$/i);
      // Checked before schema validation: an otherwise invalid call still gets the spoof error.
      await alice.fails('add_message', { author: 'carol', to: 42 }, /^Identity-override spoof rejected: 'author' is stamped by the server$/i);
      for (const key of ['sender', 'senderId', 'sender_id', 'agentId', 'agent_id', 'identity', 'userId', 'user_id', 'AUTHOR']) {
        await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', [key]: 'carol' },
          new RegExp(`^Identity-override spoof rejected: '${key}' is stamped by the server$`, 'i'));
      }
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'b', colour: 'red' }, "Unknown argument 'colour'");
      await bob.fails('list_messages', { color: 'red' }, "Unknown argument 'color'");
      await bob.fails('get_message', { messageId: m.m1.messageId, verbose: true }, "Unknown argument 'verbose'");
      assert.equal((await inbox(bob)).totalCount, before, 'a rejected send reached bob');
      // `from` as a list_messages filter is fine.
      const fromAlice = await inbox(bob, { from: '@alice' });
      assert.ok(fromAlice.messages.length >= 3);
      assert.ok(fromAlice.messages.every((x) => x.from === '@alice'));
      await bob.fails('list_messages', { from: '@nobody' }, /nobody/);
    });

    it('role mail: a shared queue for the role holders', async () => {
      m.r1 = await alice.ok('add_message', { to: 'role:reviewer', subject: 'Review the migration plan', body: 'Whoever reviews: the plan is in the PR.' });
      assert.equal(m.r1.recipientCount, 1, 'a role counts once');
      for (const a of [bob, carol]) {
        const r = rowOf(await inbox(a), m.r1.messageId);
        assert.ok(r, `${a.name} does not see the role message`);
        assert.deepEqual(r.to, ['role:reviewer']);
        assert.equal(r.readAt, null);
      }
      assert.ok(!ids(await inbox(alice)).includes(m.r1.messageId), 'a role message is not in its sender inbox');
      assert.ok(ids(await inbox(alice, { box: 'outbox' })).includes(m.r1.messageId));
      await mallory.fails('get_message', { messageId: m.r1.messageId }, `Message not found: ${m.r1.messageId}`);
    });

    it('broadcast: one delivery per agent, humans and sender excluded', async () => {
      m.b1 = await alice.ok('add_message', { to: '*', subject: 'Deploy freeze from 18:00', body: 'No deploys tonight.' });
      assert.equal(m.b1.recipientCount, AGENTS.length - 1);
      for (const a of [bob, carol, mallory]) {
        const r = rowOf(await inbox(a), m.b1.messageId);
        assert.ok(r, `${a.name} did not get the broadcast`);
        assert.deepEqual(r.to, ['*']);
      }
      assert.ok(!ids(await inbox(alice)).includes(m.b1.messageId), 'the broadcast sender got their own broadcast');
      if (hank) assert.ok(!ids(await inbox(hank)).includes(m.b1.messageId), 'a human got a broadcast');
    });

    it("an outsider gets 'Message not found' with no hint the message exists [stringify-sensitive]", async () => {
      const id = m.m1.messageId;
      const notFound = `Message not found: ${id}`;
      await mallory.fails('get_message', { messageId: id }, notFound);
      await mallory.fails('get_message', { messageId: FAKE }, `Message not found: ${FAKE}`);
      await mallory.fails('archive_message', { messageId: id }, notFound);
      await mallory.fails('mark_read', { messageId: id }, notFound);
      await mallory.fails('add_message', { to: '@alice', subject: 're', body: 'b', inReplyTo: id }, notFound);
      const arr = await mallory.ok('mark_read', { messageId: [id] });
      assert.deepEqual(arr.results, [{ messageId: id, status: 'error', error: notFound }]);
      assert.deepEqual(ids(await inbox(mallory)), [m.b1.messageId], 'mallory sees exactly the broadcast');
      assert.deepEqual(ids(await inbox(mallory, { threadId: m.m1.threadId, box: 'all' })), []);
      assert.equal(rowOf(await inbox(bob), id).readAt, null, "an outsider's mark_read changed bob's state");
    });

    it('threads: replies join the parent thread', async () => {
      m.rep1 = await bob.ok('add_message', { to: '@alice', subject: 'Re: Handoff', body: 'On it.', inReplyTo: m.m1.messageId });
      assert.equal(m.rep1.threadId, m.m1.threadId);
      m.rep2 = await alice.ok('add_message', { to: ['@bob'], subject: 'Re: Re: Handoff', body: 'Thanks.', inReplyTo: m.rep1.messageId });
      assert.equal(m.rep2.threadId, m.m1.threadId);
      assert.notEqual(m.m2.threadId, m.m1.threadId, 'a new message opens a new thread');
      const t = await alice.ok('list_messages', { box: 'all', threadId: m.m1.threadId });
      assert.deepEqual(ids(t), [m.rep2.messageId, m.rep1.messageId, m.m1.messageId], 'thread listing, newest first');
      const g = await alice.ok('get_message', { messageId: m.rep1.messageId });
      assert.equal(g.inReplyTo, m.m1.messageId);
      assert.equal(g.threadId, m.m1.threadId);
      const bt = await bob.ok('list_messages', { threadId: m.m1.threadId });
      assert.deepEqual(ids(bt), [m.rep2.messageId, m.m1.messageId], "bob's inbox part of the thread");
    });

    it('get_message returns the full message', async () => {
      m.d1 = await alice.ok('add_message', {
        to: ['@bob'],
        subject: 'Rollout details',
        body: 'Line one.\nLine two with ünïcödé and an emoji 🚀.',
        priority: 'high',
        originSessionId: 'SESSION:interop-origin',
        relatedSessions: ['SESSION:interop-related'],
        relatedTickets: ['#123', 'acme/api#7'],
        taggedConcepts: ['Schema Migration', 'CONCEPT:rollout-plan'],
      });
      assert.equal(m.d1.priority, 'high');
      const g = await bob.ok('get_message', { messageId: m.d1.messageId });
      assert.equal(g.messageId, m.d1.messageId);
      assert.equal(g.subject, 'Rollout details');
      assert.equal(g.body, 'Line one.\nLine two with ünïcödé and an emoji 🚀.');
      assert.equal(g.from, '@alice');
      assert.deepEqual(g.to, ['@bob']);
      assert.equal(g.priority, 'high');
      assert.equal(g.sentAt, m.d1.sentAt);
      assert.equal(g.readAt, null);
      assert.equal(g.archivedAt, null);
      assert.equal(g.retracted, false);
      assert.equal(g.threadId, m.d1.threadId);
      assert.equal(g.inReplyTo ?? null, null);
      assert.equal(g.originSessionId, 'SESSION:interop-origin');
      assert.ok(JSON.stringify(g.relatedSessions).includes('SESSION:interop-related'), `relatedSessions: ${JSON.stringify(g.relatedSessions)}`);
      const tickets = JSON.stringify(g.relatedTickets);
      assert.ok(tickets.includes('123') && tickets.includes('acme/api'), `relatedTickets: ${tickets}`);
      assert.ok(Array.isArray(g.taggedConcepts), 'taggedConcepts is an array');
      const conceptIds = g.taggedConcepts.map((c) => c.id);
      assert.ok(conceptIds.includes('CONCEPT:schema-migration'), `taggedConcepts: ${JSON.stringify(g.taggedConcepts)}`);
      assert.ok(conceptIds.includes('CONCEPT:rollout-plan'), `taggedConcepts: ${JSON.stringify(g.taggedConcepts)}`);
      for (const c of g.taggedConcepts) assert.equal(typeof c.name, 'string');
      const g1 = await bob.ok('get_message', { messageId: m.m1.messageId });
      assert.match(g1.originSessionId, /^SESSION:.+/, "a message without originSessionId originates in the connection's session");
      const again = await bob.ok('get_message', { messageId: m.d1.messageId });
      assert.equal(again.readAt, null, 'get_message changed read state');
    });

    it('search: full text and concepts', async () => {
      assert.ok(ids(await inbox(bob, { query: 'POL-358' })).includes(m.m1.messageId), 'query POL-358');
      assert.ok(ids(await inbox(bob, { query: 'migration' })).includes(m.m1.messageId), 'query migration');
      await bob.ok('list_messages', { query: '"unbalanced' });
      await bob.ok('list_messages', { query: 'AND OR NOT ( * ^ :' });
      assert.deepEqual(ids(await inbox(bob, { query: 'zzyzx-no-such-word' })), []);
      await waitFor(async () => ids(await inbox(bob, { taggedConcepts: ['schema migration'] })).includes(m.d1.messageId), 'concept search by free text');
      const both = await inbox(bob, { taggedConcepts: ['CONCEPT:schema-migration', 'Rollout Plan'] });
      assert.ok(ids(both).includes(m.d1.messageId), 'concept search by id and text');
      assert.ok(!ids(both).includes(m.m3.messageId), 'every tag must match');
      assert.deepEqual(ids(await inbox(bob, { taggedConcepts: ['CONCEPT:rollout-plan', 'no-such-concept-xyz'] })), []);
    });

    it('concepts: the extractor tags every message off the send path; list_concepts counts them', async () => {
      // m1 carried no caller concepts: whatever it has came from the server's extractor.
      const tagged = await waitFor(async () => {
        const g = await bob.ok('get_message', { messageId: m.m1.messageId });
        return g.taggedConcepts.length > 0 && g;
      }, 'extracted concepts on a message sent without any');
      for (const c of tagged.taggedConcepts) assert.match(c.id, /^CONCEPT:[\p{Ll}\p{N}]+(-[\p{Ll}\p{N}]+)*$/u, `concept id ${c.id}`);
      const { concepts } = await bob.ok('list_concepts', {});
      const byId = Object.fromEntries(concepts.map((c) => [c.id, c]));
      assert.ok(byId['CONCEPT:schema-migration']?.count >= 1, `list_concepts: ${JSON.stringify(concepts)}`);
      assert.ok(byId[tagged.taggedConcepts[0].id], 'an extracted concept is listed');
      for (let i = 1; i < concepts.length; i++) assert.ok(concepts[i - 1].count >= concepts[i].count, 'most frequent first');
      // mallory sees none of bob's mail, so none of its concepts.
      const outsider = await mallory.ok('list_concepts', {});
      assert.ok(!outsider.concepts.some((c) => c.id === 'CONCEPT:schema-migration'), 'concepts leak to an outsider');
      await bob.fails('list_concepts', { limit: 0 }, 'limit must be between 1 and 500 (got 0)');
    });

    it('pagination and list validation', async () => {
      await bob.fails('list_messages', { limit: 0 }, 'limit must be between 1 and 200 (got 0)');
      await bob.fails('list_messages', { limit: 201 }, /limit must be between 1 and 200 \(got 201\)/);
      await bob.fails('list_messages', { offset: -1 }, /offset/);
      await bob.fails('list_messages', { box: 'trash' }, /box/);
      const all = await inbox(bob);
      assert.ok(all.totalCount >= 5);
      for (let i = 1; i < all.messages.length; i++) {
        assert.ok(Date.parse(all.messages[i - 1].sentAt) >= Date.parse(all.messages[i].sentAt), 'newest first');
      }
      const seen = [];
      let offset = 0;
      for (let guard = 0; guard < 100; guard++) {
        const page = await bob.ok('list_messages', { limit: 2, offset });
        assert.equal(page.totalCount, all.totalCount);
        seen.push(...ids(page));
        if (page.nextOffset === null) break;
        assert.equal(page.nextOffset, offset + 2);
        offset = page.nextOffset;
      }
      assert.deepEqual(seen, ids(all), 'pages concatenate to the full list');
      const defaults = await bob.ok('list_messages', {});
      assert.ok(defaults.messages.length <= 50);
    });

    it('archive: per recipient, separate from read', async () => {
      const a = await bob.ok('archive_message', { messageId: m.m3.messageId });
      assert.equal(a.messageId, m.m3.messageId);
      assert.equal(a.status, 'archived');
      assertIsoTime(a.archivedAt, 'archivedAt');
      assert.equal(a.durable, true);
      assert.ok(!ids(await inbox(bob)).includes(m.m3.messageId), 'archived mail is hidden by default');
      const withArchived = await inbox(bob, { includeArchived: true });
      const r = rowOf(withArchived, m.m3.messageId);
      assert.ok(r, 'includeArchived shows archived mail');
      assert.equal(r.archivedAt, a.archivedAt);
      assert.equal(r.readAt, null, 'archive is not read');
      assert.ok(ids(await inbox(alice, { box: 'outbox' })).includes(m.m3.messageId), "bob's archive hides nothing from the sender");
      await alice.fails('archive_message', { messageId: m.m1.messageId }, /recipient|not found/i);
    });

    it('mark_read scalar: first readAt is kept; sender is not a recipient', async () => {
      const r = await bob.ok('mark_read', { messageId: m.m1.messageId });
      assert.equal(r.messageId, m.m1.messageId);
      assert.equal(r.status, 'read');
      assert.equal(r.durable, true);
      assertIsoTime(r.readAt, 'readAt');
      const again = await bob.ok('mark_read', { messageId: m.m1.messageId });
      assert.equal(again.readAt, r.readAt, 'marking again keeps the first readAt');
      assert.equal(rowOf(await inbox(bob), m.m1.messageId).readAt, r.readAt);
      assert.equal(rowOf(await inbox(alice, { box: 'outbox' }), m.m1.messageId).readAt, null, 'outbox rows carry readAt null');
      await alice.fails('mark_read', { messageId: m.m1.messageId }, `Not a recipient: ${m.m1.messageId}`);
    });

    it('read state is per recipient for broadcasts and shared for roles', async () => {
      await bob.ok('mark_read', { messageId: m.b1.messageId });
      assert.notEqual(rowOf(await inbox(bob), m.b1.messageId).readAt, null);
      assert.equal(rowOf(await inbox(carol), m.b1.messageId).readAt, null, "bob's read of a broadcast marked carol's");
      assert.equal(rowOf(await inbox(mallory), m.b1.messageId).readAt, null, "bob's read of a broadcast marked mallory's");

      await carol.ok('mark_read', { messageId: m.r1.messageId });
      const br = rowOf(await inbox(bob), m.r1.messageId);
      assert.notEqual(br.readAt, null, 'a role message has one shared read state');
      assert.ok(JSON.stringify(br.readBy ?? null).includes('carol'), `readBy names the reader: ${JSON.stringify(br.readBy)}`);
    });

    it('mark_read array: per-id results in order, never isError [stringify-sensitive]', async () => {
      const req = [m.m2.messageId, FAKE, m.d1.messageId, m.self.messageId];
      const res = await bob.call('mark_read', { messageId: req });
      assert.equal(res.isError, false, `mark_read(${JSON.stringify(res.sent)}) with an array failed as a whole: ${res.text}`);
      const { results, durable } = res.data;
      assert.equal(durable, true);
      assert.ok(Array.isArray(results), `results: ${JSON.stringify(res.data)}`);
      assert.deepEqual(results.map((x) => x.messageId), req, 'one result per requested id, in order');
      assert.deepEqual(results.map((x) => x.status), ['read', 'error', 'read', 'error']);
      assertIsoTime(results[0].readAt, 'results[0].readAt');
      assert.equal(results[1].error, `Message not found: ${FAKE}`);
      assert.equal(results[3].error, `Message not found: ${m.self.messageId}`);
      const bi = await inbox(bob);
      assert.equal(rowOf(bi, m.m2.messageId).readAt, results[0].readAt);
      assert.equal(rowOf(bi, m.d1.messageId).readAt, results[2].readAt);
      assert.equal(rowOf(await inbox(carol), m.m2.messageId).readAt, null, "bob's read of m2 marked carol's copy");
      // Repeating keeps the first readAt.
      const again = await bob.ok('mark_read', { messageId: [m.m2.messageId] });
      assert.deepEqual(again.results, [{ messageId: m.m2.messageId, status: 'read', readAt: results[0].readAt }]);
    });

    it('mark_read strings that are not arrays of message ids stay scalar ids', async () => {
      for (const s of ['[]', '[1]', '["x"]', '{"messageId":"MESSAGE:x"}', '[not json', `["${m.rep2.messageId}", 1]`]) {
        await bob.fails('mark_read', { messageId: s }, `Message not found: ${s}`);
      }
      await bob.fails('mark_read', { messageId: 'MESSAGE:nope' }, 'Message not found: MESSAGE:nope');
      // A native empty array is an error (the stringified profile sends "[]", a scalar id, also an error).
      await bob.fails('mark_read', { messageId: [] });
      assert.equal(rowOf(await inbox(bob), m.rep2.messageId).readAt, null, 'a malformed string marked a message');
    });

    it('mark_read argument rules', async () => {
      await bob.fails('mark_read', { messageId: m.rep2.messageId, all: true });
      await bob.fails('mark_read', {});
      await bob.fails('mark_read', { all: false });
      await bob.fails('mark_read', { through: m.rep2.messageId });
      await bob.fails('mark_read', { all: false, through: m.rep2.messageId });
      await bob.fails('mark_read', { messageId: 42 });
      await bob.fails('mark_read', { all: 'yes' });
      const r = await bob.ok('mark_read', { messageId: m.m1.messageId, all: false });
      assert.equal(r.status, 'read', 'all:false counts as absent');
      assert.equal(rowOf(await inbox(bob), m.rep2.messageId).readAt, null, 'a rejected mark_read changed state');
    });

    it('personal delivery wins over the role delivery of the same message', async () => {
      m.pr = await alice.ok('add_message', { to: ['@carol', 'role:reviewer'], subject: 'For carol and the reviewers', body: 'both' });
      assert.equal(m.pr.recipientCount, 2);
      await carol.ok('mark_read', { messageId: m.pr.messageId });
      assert.notEqual(rowOf(await inbox(carol), m.pr.messageId).readAt, null);
      assert.equal(rowOf(await inbox(bob), m.pr.messageId).readAt, null, "carol's personal read consumed the role delivery");
    });

    it('mark_read all: drains personal mail, withholds role mail, then noop', async () => {
      m.x1 = await alice.ok('add_message', { to: '@bob', subject: 'x1', body: 'one' });
      m.x2 = await carol.ok('add_message', { to: ['@bob'], subject: 'x2', body: 'two' });
      m.b2 = await alice.ok('add_message', { to: '*', subject: 'b2', body: 'second broadcast' });
      // bob now has unread, unarchived personal mail: rep2, x1, x2, b2; unread
      // role mail: pr; unread archived mail: m3.
      const r = await bob.ok('mark_read', { all: true });
      assert.equal(r.status, 'read', JSON.stringify(r));
      assert.equal(r.matchedCount, 4, JSON.stringify(r));
      assert.equal(r.readCount, 4);
      assert.equal(r.durableCount, 4);
      assert.equal(r.failureCount, 0);
      assert.deepEqual(r.failures, []);
      assert.equal(r.withheldRoleCount, 1);
      assertIsoTime(r.snapshotAt, 'snapshotAt');
      assert.deepEqual(ids(await inbox(bob, { unreadOnly: true })), [m.pr.messageId], 'only the role message is left unread');
      assert.ok(ids(await inbox(bob, { unreadOnly: true, includeArchived: true })).includes(m.m3.messageId), 'archived mail is not drained');
      assert.equal(rowOf(await inbox(carol), m.b2.messageId).readAt, null, "bob's drain read carol's broadcast");
      const n = await bob.ok('mark_read', { all: true });
      assert.equal(n.status, 'noop');
      assert.equal(n.matchedCount, 0);
      assert.equal(n.readCount, 0);
      assert.equal(n.withheldRoleCount, 1);
    });

    it('mark_read all through a watermark leaves later mail unread', async () => {
      const before = await inbox(carol);
      const wm = before.watermark;
      assert.equal(wm, before.messages[0].messageId);
      m.late = await alice.ok('add_message', { to: '@carol', subject: 'late', body: 'after the watermark' });
      const r = await carol.ok('mark_read', { all: true, through: wm });
      assert.equal(r.matchedCount, 3, `carol's unread personal mail at the watermark is m2, b1, b2: ${JSON.stringify(r)}`);
      assert.equal(r.readCount, 3);
      assert.equal(r.failureCount, 0);
      assert.deepEqual(ids(await inbox(carol, { unreadOnly: true })), [m.late.messageId]);
      await carol.fails('mark_read', { all: true, through: FAKE });
    });

    it('mark_read all with includeRoles takes the role queue too', async () => {
      const r = await bob.ok('mark_read', { all: true, includeRoles: true });
      assert.equal(r.matchedCount, 1, JSON.stringify(r));
      assert.equal(r.readCount, 1);
      assert.equal(r.withheldRoleCount, 0);
      assert.deepEqual(ids(await inbox(bob, { unreadOnly: true })), []);
      const mal = await mallory.ok('mark_read', { all: true });
      assert.equal(mal.matchedCount, 2, 'mallory drains exactly her two broadcasts');
      const ao = await inbox(alice, { box: 'outbox' });
      assert.ok(ao.messages.every((x) => x.readAt === null), 'outbox rows carry readAt null');
    });

    it('implicit next-session roles, waiting role queues, AGENT:* and human senders', async () => {
      const ns = await alice.ok('add_message', { to: 'role:next-session', subject: 'For the next session', body: 'pick up POL-358' });
      assert.equal(ns.recipientCount, 1);
      for (const a of [bob, carol, mallory]) {
        assert.ok(ids(await inbox(a)).includes(ns.messageId), `${a.name} does not implicitly hold role:next-session`);
      }
      assert.ok(!ids(await inbox(alice)).includes(ns.messageId), 'a role message is not in its sender inbox');
      const nsb = await alice.ok('add_message', { to: 'role:next-session-of-bob', subject: "For bob's next session", body: 'b' });
      assert.ok(ids(await inbox(bob)).includes(nsb.messageId), 'bob does not hold role:next-session-of-bob');
      assert.ok(!ids(await inbox(carol)).includes(nsb.messageId), 'carol holds role:next-session-of-bob');
      await alice.fails('add_message', { to: 'role:next-session-of-nobody', subject: 's', body: 'b' }, /nobody/);

      // A role nobody holds yet is accepted; the queue waits for a holder.
      const waiting = await alice.ok('add_message', { to: 'role:auditor', subject: 'Audit me', body: 'whenever someone audits' });
      assert.equal(waiting.recipientCount, 1);
      assert.ok(!ids(await inbox(carol)).includes(waiting.messageId));
      await runCli(['role', 'grant', '--db', w.db, 'carol', 'auditor'], { dir: w.dir });
      assert.ok(ids(await inbox(carol)).includes(waiting.messageId), 'a role granted while servers run does not show its waiting queue');
      assert.ok(!ids(await inbox(bob)).includes(waiting.messageId));

      const star = await alice.ok('add_message', { to: 'AGENT:*', subject: 'AGENT:* broadcast', body: 'b' });
      assert.equal(star.recipientCount, AGENTS.length - 1);
      assert.deepEqual(rowOf(await inbox(bob), star.messageId)?.to, ['*']);

      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'x'.repeat(64 * 1024 + 1) }, /body/);
      await alice.fails('add_message', { to: '@bob', subject: 's', body: 'lone \udc00 surrogate' }, /UTF-8|surrogate|body/i);
      const page = await bob.ok('list_messages', { offset: 10000 });
      assert.deepEqual(page.messages, []);
      assert.equal(page.nextOffset, null);
      const toBob = await alice.ok('list_messages', { box: 'outbox', to: '@bob', limit: 200 });
      assert.ok(toBob.messages.length > 0 && toBob.messages.every((x) => x.to.includes('@bob')), 'list_messages to filter');

      if (hank) {
        const h = await hank.ok('add_message', { to: '@alice', subject: 'From a human', body: 'ruling: ship it' });
        const g = await alice.ok('get_message', { messageId: h.messageId });
        assert.equal(g.from, `human:${HUMAN}`);
      }
    });

    if (profileName === 'stringified') {
      it('stringified-array probe: other declared arrays are rejected or mean the same array', async (t) => {
        const probes = {
          'add_message.to': ['add_message', { to: ['@bob'], subject: 'probe to', body: 'p' }, (d) => d.recipientCount === 1],
          'add_message.relatedSessions': ['add_message', { to: '@bob', subject: 'probe sessions', body: 'p', relatedSessions: ['SESSION:probe'] }, null],
          'add_message.relatedTickets': ['add_message', { to: '@bob', subject: 'probe tickets', body: 'p', relatedTickets: ['#77'] }, null],
          'add_message.taggedConcepts': ['add_message', { to: '@bob', subject: 'probe concepts', body: 'p', taggedConcepts: ['probe-concept'] }, null],
          'list_messages.taggedConcepts': ['list_messages', { taggedConcepts: ['schema-migration'] }, null],
        };
        for (const [label, [tool, args, check]] of Object.entries(probes)) {
          const key = label.split('.')[1];
          if (!declaredArrayArgs(bob.tools[tool]?.inputSchema).includes(key)) {
            t.diagnostic(`${label}: not declared as an array; skipped`);
            continue;
          }
          const native = await bob.callRaw(tool, args);
          const str = await bob.callRaw(tool, { ...args, [key]: JSON.stringify(args[key]) });
          if (str.isError) {
            t.diagnostic(`${label}: stringified array rejected: ${str.text}`);
            continue;
          }
          t.diagnostic(`${label}: stringified array ACCEPTED (consider adding it to STRINGIFIED_ACCEPTED)`);
          assert.equal(native.isError, false, `${label}: native call failed: ${native.text}`);
          if (tool === 'add_message') {
            const gn = await bob.ok('get_message', { messageId: native.data.messageId });
            const gs = await bob.ok('get_message', { messageId: str.data.messageId });
            const field = key === 'to' ? 'to' : key;
            assert.deepEqual(gs[field], gn[field], `${label}: a stringified array that is accepted must mean the array`);
            if (check) assert.ok(check(str.data), `${label}: ${JSON.stringify(str.data)}`);
          } else {
            assert.deepEqual(ids(str.data), ids(native.data), `${label}: a stringified array that is accepted must mean the array`);
          }
        }
      });
    }

    it('lifecycle: unarchive, mark_unread, delete, retract, mailbox_status, read grants, relatedTo', async () => {
      const id = (await alice.ok('add_message', { to: ['@bob', '@carol'], subject: 'Lifecycle zorblatt', body: 'the zorblatt plan', taggedConcepts: ['lifecycle', 'zorblatt'] })).messageId;
      const nf = `Message not found: ${id}`;
      // Annotations tell clients which calls are safe to approve.
      for (const [tool, ro, destructive] of [['mailbox_status', true, false], ['delete_message', false, true], ['retract_message', false, true], ['unarchive_message', false, false], ['mark_unread', false, false]]) {
        const a = alice.tools[tool].annotations;
        assert.equal(a?.readOnlyHint ?? false, ro, `${tool}.readOnlyHint`);
        assert.equal(a?.destructiveHint, destructive, `${tool}.destructiveHint`);
        assert.equal(a?.idempotentHint, true, `${tool}.idempotentHint`);
      }

      await bob.ok('mark_read', { messageId: id });
      const u = await bob.ok('mark_unread', { messageId: id });
      assert.deepEqual([u.messageId, u.status, u.readAt, u.durable], [id, 'unread', null, true]);
      assert.equal(rowOf(await inbox(bob), id).readAt, null);
      await bob.ok('mark_unread', { messageId: id }); // already unread: idempotent
      await alice.fails('mark_unread', { messageId: id }, `Not a recipient: ${id}`);
      await carol.fails('mark_unread', { messageId: FAKE }, `Message not found: ${FAKE}`);

      await bob.ok('archive_message', { messageId: id });
      const ua = await bob.ok('unarchive_message', { messageId: id });
      assert.deepEqual([ua.status, ua.archivedAt], ['unarchived', null]);
      assert.ok(rowOf(await inbox(bob), id), 'unarchived mail is listed again');
      await bob.ok('unarchive_message', { messageId: id });
      await alice.fails('unarchive_message', { messageId: id }, `Not a recipient: ${id}`);
      await mallory.fails('unarchive_message', { messageId: id }, nf);

      // mailbox_status counts equal list_messages totals.
      const st = await bob.ok('mailbox_status', {});
      assert.equal(st.identity, '@bob');
      assert.equal(st.unread.total, (await bob.ok('list_messages', { unreadOnly: true })).totalCount);
      assert.equal(st.unread.direct, (await bob.ok('list_messages', { unreadOnly: true, via: 'direct' })).totalCount);
      assert.equal(st.unread.broadcast, (await bob.ok('list_messages', { unreadOnly: true, via: 'broadcast' })).totalCount);
      assert.equal(st.unread.role, (await bob.ok('list_messages', { unreadOnly: true, via: 'role' })).totalCount);
      assert.equal(st.unread.human, (await bob.ok('list_messages', { unreadOnly: true, from: 'human:*' })).totalCount);
      for (const p of ['high', 'normal', 'low']) {
        assert.equal(st.unread.byPriority[p], (await bob.ok('list_messages', { unreadOnly: true, priority: p })).totalCount, `byPriority.${p}`);
      }
      assert.equal(st.archived, (await bob.ok('list_messages', { archivedOnly: true })).totalCount);
      for (const r of st.roles) assert.equal(r.unread, (await bob.ok('list_messages', { unreadOnly: true, via: 'role', to: r.role })).totalCount, r.role);
      assert.ok(st.roles.some((r) => r.role === 'role:reviewer'), 'bob holds role:reviewer');
      assert.equal(st.unread.direct + st.unread.broadcast + st.unread.role, st.unread.total);

      // Read delegation: mallory reads alice's inbox only with a grant, and changes nothing.
      const forAlice = (await bob.ok('add_message', { to: '@alice', subject: 'For alice only', body: 'b' })).messageId;
      await mallory.fails('list_messages', { of: '@alice' }, 'No read grant for @alice');
      await mallory.fails('get_message', { messageId: forAlice, of: '@alice' }, 'No read grant for @alice');
      await runCli(['grant', 'read-inbox', '--db', w.db, '@mallory', '@alice'], { dir: w.dir });
      const seen = await mallory.ok('list_messages', { of: '@alice', limit: 200 });
      assert.ok(ids(seen).includes(forAlice), 'the grantee sees the owner inbox');
      assert.equal(seen.totalCount, (await inbox(alice)).totalCount);
      assert.equal((await mallory.ok('get_message', { messageId: forAlice, of: '@alice' })).subject, 'For alice only');
      for (const tool of ['mark_read', 'mark_unread', 'archive_message', 'unarchive_message', 'delete_message', 'retract_message']) {
        await mallory.fails(tool, { messageId: forAlice }, `Message not found: ${forAlice}`);
        await mallory.fails(tool, { messageId: forAlice, of: '@alice' }, "Unknown argument 'of'");
      }
      const g = await alice.ok('get_message', { messageId: forAlice });
      assert.deepEqual([g.readAt, g.archivedAt, g.retracted], [null, null, false], 'the grantee changed the owner mail');
      await runCli(['revoke', 'read-inbox', '--db', w.db, '@mallory', '@alice'], { dir: w.dir });
      await mallory.fails('list_messages', { of: '@alice' }, 'No read grant for @alice');

      // relatedTo: shared concepts first, the message itself excluded.
      const rel = (await alice.ok('add_message', { to: '@bob', subject: 'Related', body: 'b', taggedConcepts: ['zorblatt', 'lifecycle'] })).messageId;
      const part = (await alice.ok('add_message', { to: '@bob', subject: 'Partly related', body: 'b', taggedConcepts: ['zorblatt'] })).messageId;
      const related = await bob.ok('list_messages', { relatedTo: id });
      assert.deepEqual(ids(related).slice(0, 2), [rel, part], 'most shared concepts first');
      assert.ok(!ids(related).includes(id), 'the message itself is excluded');
      await mallory.fails('list_messages', { relatedTo: id }, nf);

      // Retraction is the sender's; the text is gone from every view and the index.
      await bob.fails('retract_message', { messageId: id }, `Not the sender: ${id}`);
      await mallory.fails('retract_message', { messageId: id }, nf);
      const rt = await alice.ok('retract_message', { messageId: id });
      assert.deepEqual([rt.status, rt.retracted], ['retracted', true]);
      await alice.ok('retract_message', { messageId: id }); // already retracted: idempotent
      const gone = await carol.ok('get_message', { messageId: id });
      assert.deepEqual([gone.retracted, gone.subject, gone.body], [true, '', '']);
      assert.equal((await carol.ok('list_messages', { query: 'zorblatt' })).totalCount, 0, 'the index still finds retracted text');

      // Deletion is per recipient; a second delete finds nothing.
      const del = await bob.ok('delete_message', { messageId: id });
      assert.deepEqual([del.status, typeof del.deletedAt], ['deleted', 'string']);
      await bob.fails('get_message', { messageId: id }, nf);
      await bob.fails('delete_message', { messageId: id }, nf);
      assert.ok(rowOf(await inbox(carol), id), 'carol keeps her copy');
      await alice.ok('delete_message', { messageId: id });
      assert.ok(!ids(await inbox(alice, { box: 'outbox' })).includes(id), 'deleted from the outbox');
      await mallory.fails('delete_message', { messageId: FAKE }, `Message not found: ${FAKE}`);
    });

    it('the client profile did what it claims', async () => {
      if (profileName === 'stringified') {
        assert.ok(w.profile.stats.stringified >= 4, `the stringified profile stringified only ${w.profile.stats.stringified} arguments`);
      } else {
        assert.equal(w.profile.stats.stringified, 0);
      }
    });
  });
}
