/**
 * The statements of a sequence email's send (services/sequences/mailer-send.ts runs them): the
 * send read under its row locks, the claim approved -> sending (with the send-time checks in the
 * same statement), and the settles after SMTP answered. The receiving server dedupes nothing, so
 * only a claimed send may reach SMTP, and a send found `sending` is never sent again.
 */
import type { Db } from '../../db/sql.js';
import { outreachBlocksQuery } from './sequences.js';
import { recordContactStopped } from './contact-moves.js';

/** A send with what its email and its checks need: the contact, the sequence and the sender. */
export interface SendRecord {
  id: string;
  workspace_id: string;
  sequence_id: string;
  contact_id: string;
  status: string;
  message_id: string;
  open_token: string;
  to_email: string | null;
  from_email: string | null;
  subject: string | null;
  body: string;
  email: string | null;
  profile_url: string | null;
  enrolled_at: Date;
  contact_status: string;
  sequence_status: string;
  from_name: string | null;
  sender_name: string | null;
}

/** The send with its contact, both rows locked for the claim's transaction. */
export async function lockSendForClaim(db: Db, sendId: string): Promise<SendRecord | undefined> {
  const [s] = await db<SendRecord[]>`
    select m.*, c.email, c.profile_url, c.enrolled_at, c.status as contact_status, q.status as sequence_status,
           ss.from_name, p.name as sender_name
    from sequence_sends m
    join sequence_contacts c on c.id = m.contact_id
    join sequences q on q.id = m.sequence_id
    left join sender_profiles p on p.id = c.sender_profile_id
    left join sequence_senders ss on ss.sequence_id = m.sequence_id and ss.sender_profile_id = c.sender_profile_id
    where m.id = ${sendId}
    for update of m, c`;
  return s;
}

/** An earlier attempt claimed it and may have delivered it: count it sent, never resend. */
export async function markSendUnconfirmed(db: Db, sendId: string): Promise<void> {
  await db`update sequence_sends set status = 'sent', unconfirmed = true, sent_at = now(), updated_at = now() where id = ${sendId} and status = 'sending'`;
}

/**
 * Claims the send (approved -> sending) unless the last moment's checks block it: reply, bounce,
 * stop, do-not-contact, cooldown or another live sequence. Checked in the statement that claims
 * the send, so both read one snapshot: a reply recorded between a separate check and the claim
 * would otherwise go unseen. Answers the block, or null when the send was claimed.
 */
export async function claimSend(db: Db, sendId: string, s: SendRecord): Promise<string | null> {
  const who = {
    email: s.email,
    profile_url: s.profile_url,
    sequence_id: s.sequence_id,
    contact_id: s.contact_id,
    since: s.enrolled_at,
  };
  const [{ block } = { block: null }] = await db<{ block: string | null }[]>`
    with b as (${outreachBlocksQuery(db, s.workspace_id, s.sequence_id, [who], false)}), claim as (
      update sequence_sends set status = 'sending', updated_at = now()
      where id = ${sendId} and status = 'approved' and (select reason from b) is null
    )
    select (select reason from b) as block`;
  return block;
}

/** The send a last-moment check blocked. */
export async function stopSend(db: Db, sendId: string, reason: string): Promise<void> {
  await db`update sequence_sends set status = 'stopped', reason = ${reason}, updated_at = now() where id = ${sendId}`;
}

/** Cooldown and other sequences are not stop reasons of 014: the contact stops here. */
export async function stopContactAtSend(db: Db, contactId: string, reason: string): Promise<void> {
  const stopped = await db<{ workspace_id: string; sequence_id: string; id: string }[]>`
    update sequence_contacts set status = 'stopped', stop_reason = ${reason}, wait_reason = null, wait_until = null, finished_at = now(),
      revision = revision + 1, updated_at = now() where id = ${contactId} and status in ('active', 'paused', 'failed')
    returning workspace_id, sequence_id, id`;
  await recordContactStopped(db, stopped, reason);
}

/** SMTP certainly did not take it: the claim is given back, so a retry may send it. */
export async function releaseSendClaim(db: Db, sendId: string): Promise<void> {
  await db`update sequence_sends set status = 'approved', updated_at = now() where id = ${sendId} and status = 'sending'`;
}

export async function markSendSent(db: Db, sendId: string): Promise<void> {
  await db`update sequence_sends set status = 'sent', sent_at = now(), updated_at = now() where id = ${sendId} and status = 'sending'`;
}
