/**
 * contact_stop_reason() (migration 014), the read every send makes in its own transaction, with
 * rows written the way the inbox writes them: the do-not-contact list, inbound replies, bounces
 * and auto-replies, and explicit stops.
 */
import { describe, expect, it } from 'vitest';
import { addEntries } from '../../store/inbox/do-not-contact.js';
import { insertMessage, upsertThread } from '../../store/inbox/messages.js';
import { normalizeEmail, normalizeProfileUrl } from '../../domain/inbox/do-not-contact.js';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { useTestDatabase } from '../support/database.js';

const db = useTestDatabase();

const workspace = async () =>
  (await createWorkspaceWithAdmin(db.sql, { name: `W ${crypto.randomUUID()}`, plan: 'paid' })).workspace_id;
const reason = async (
  ws: string,
  email: string | null,
  profileUrl: string | null,
  since: Date,
  contact: string | null = null,
) => {
  const [row] = await db.sql<
    { reason: string | null }[]
  >`select contact_stop_reason(${ws}, ${email}, ${profileUrl}, ${since}, ${contact}) as reason`;
  return row!.reason;
};
const listed = (ws: string, kind: 'email' | 'domain' | 'profile_url', value: string) =>
  addEntries(db.sql, ws, [{ kind, value }], { reason: null, source: 'manual', createdBy: null });

async function inbound(
  ws: string,
  kind: 'reply' | 'bounce' | 'auto_reply',
  who: { email?: string; profileUrl?: string },
  at: Date,
) {
  await db.sql.begin(async (tx) => {
    const threadId = await upsertThread(
      tx,
      {
        workspaceId: ws,
        channel: who.email ? 'email' : 'pnet',
        externalKey: null,
        contactEmail: who.email,
        contactProfileUrl: who.profileUrl,
      },
      true,
    );
    await insertMessage(tx, {
      workspaceId: ws,
      threadId,
      direction: 'inbound',
      kind,
      fromEmail: who.email,
      fromProfileUrl: who.profileUrl,
      body: 'hello',
      externalId: `<${crypto.randomUUID()}@test>`,
      occurredAt: at,
    });
  });
}

const hourAgo = () => new Date(Date.now() - 3_600_000);
const inAnHour = () => new Date(Date.now() + 3_600_000);

describe('contact_stop_reason', () => {
  it('is null for a person nothing stops', async () => {
    const ws = await workspace();
    expect(await reason(ws, 'free@example.com', 'https://pnet.example/in/free', hourAgo())).toBeNull();
  });

  it('stops a listed email whatever its case or spaces, at any time', async () => {
    const ws = await workspace();
    await listed(ws, 'email', '  Ada@Example.COM ');
    expect(await reason(ws, 'ada@example.com', null, hourAgo())).toBe('do_not_contact');
    expect(await reason(ws, ' ADA@example.com', null, inAnHour())).toBe('do_not_contact');
    expect(await reason(ws, 'bob@example.com', null, hourAgo())).toBeNull();
  });

  it('stops every address of a listed domain, and only that domain', async () => {
    const ws = await workspace();
    await listed(ws, 'domain', '@Acme.com');
    expect(await reason(ws, 'anyone@acme.com', null, hourAgo())).toBe('do_not_contact');
    expect(await reason(ws, 'anyone@notacme.com', null, hourAgo())).toBeNull();
    expect(await reason(ws, 'anyone@sub.acme.com', null, hourAgo())).toBeNull();
  });

  it('stops a listed profile URL however the URL is written', async () => {
    const ws = await workspace();
    await listed(ws, 'profile_url', 'https://www.pnet.example/in/Jane-Doe/?trk=abc');
    for (const url of [
      'pnet.example/in/jane-doe',
      'http://pnet.example/in/JANE-DOE/',
      'https://www.pnet.example/in/jane-doe#top',
    ]) {
      expect(await reason(ws, null, url, hourAgo())).toBe('do_not_contact');
    }
    expect(await reason(ws, null, 'https://pnet.example/in/jane-doe-2', hourAgo())).toBeNull();
    // The TypeScript rule stores what the SQL rule compares.
    const [row] = await db.sql<
      { n: string }[]
    >`select normalize_profile_url(${'HTTPS://WWW.pnet.example/in/Jane-Doe/?x=1'}) as n`;
    expect(normalizeProfileUrl('HTTPS://WWW.pnet.example/in/Jane-Doe/?x=1')).toBe(row!.n);
    expect(normalizeEmail('  A@B.C ')).toBe('a@b.c');
  });

  it('stops on a reply at or after the enrolment, not on one before it', async () => {
    const ws = await workspace();
    const replyAt = new Date();
    await inbound(ws, 'reply', { email: 'Reply@Example.com' }, replyAt);
    expect(await reason(ws, 'reply@example.com', null, new Date(replyAt.getTime() - 60_000))).toBe('replied');
    expect(await reason(ws, 'reply@example.com', null, replyAt)).toBe('replied');
    expect(await reason(ws, 'reply@example.com', null, new Date(replyAt.getTime() + 60_000))).toBeNull();
  });

  it('stops on a pnet reply by profile URL', async () => {
    const ws = await workspace();
    await inbound(ws, 'reply', { profileUrl: 'https://pnet.example/in/grace/' }, new Date());
    expect(await reason(ws, 'grace@example.com', 'pnet.example/in/grace', hourAgo())).toBe('replied');
  });

  it('stops on a bounce of the address, but an auto-reply stops nothing', async () => {
    const ws = await workspace();
    await inbound(ws, 'bounce', { email: 'gone@example.com' }, new Date());
    await inbound(ws, 'auto_reply', { email: 'away@example.com' }, new Date());
    expect(await reason(ws, 'gone@example.com', null, hourAgo())).toBe('bounced');
    expect(await reason(ws, 'away@example.com', null, hourAgo())).toBeNull();
  });

  it('stops on an explicit stop by email, profile URL or sequence contact, made after the enrolment', async () => {
    const ws = await workspace();
    const contact = crypto.randomUUID();
    await db.sql`
      insert into contact_stops (workspace_id, email, profile_url, sequence_contact_id)
      values (${ws}, 'stop@example.com', null, null), (${ws}, null, 'pnet.example/in/stop', null), (${ws}, null, null, ${contact})`;
    expect(await reason(ws, 'STOP@example.com', null, hourAgo())).toBe('stopped');
    expect(await reason(ws, null, 'https://pnet.example/in/stop/', hourAgo())).toBe('stopped');
    expect(await reason(ws, 'other@example.com', null, hourAgo(), contact)).toBe('stopped');
    // A later enrolment is not stopped by an earlier stop.
    expect(await reason(ws, 'stop@example.com', null, inAnHour())).toBeNull();
  });

  it('keeps workspaces apart', async () => {
    const [a, b] = [await workspace(), await workspace()];
    await listed(a, 'email', 'shared@example.com');
    expect(await reason(b, 'shared@example.com', null, hourAgo())).toBeNull();
  });
});
