/**
 * Email out of sequences and inbox replies: a small `Mailer` interface, its SMTP transport (nodemailer, from
 * `SMTP_URL`), and the sending activity. The receiving server dedupes nothing, so "never twice"
 * is ours: the send is claimed in Postgres (approved -> sending) in the same transaction that reads
 * contact_stop_reason(), and only a claimed send reaches SMTP. A retry that finds the claim
 * already taken never sends again: the first attempt may have been delivered.
 */
import type { Sql } from '../../db/sql.js';
import { outreachBlocksQuery } from '../../store/sequences/sequences.js';
import { Mailer, certainlyNotSent, htmlWithPixel } from '../../integrations/mailer.js';


export type SendOutcome = 'sent' | 'already_sent' | 'unconfirmed' | 'stopped' | 'not_sendable' | 'no_mailer';

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

export interface MailerActivityDeps {
  sql: Sql;
  mailer: Mailer | null;
  /** The API's public address, for the open-tracking pixel; emails carry no pixel without it. */
  publicBaseUrl?: string | undefined;
}

export function createMailerActivities(deps: MailerActivityDeps) {
  const { sql, mailer } = deps;
  return {
    async sendSequenceEmail({ sendId }: { sendId: string }): Promise<{ outcome: SendOutcome; reason: string | null }> {
      if (!mailer) return { outcome: 'no_mailer', reason: 'SMTP_URL is not configured' };
      const claimed = await sql.begin(async (tx) => {
        const [s] = await tx<SendRecord[]>`
          select m.*, c.email, c.profile_url, c.enrolled_at, c.status as contact_status, q.status as sequence_status,
                 ss.from_name, p.name as sender_name
          from sequence_sends m
          join sequence_contacts c on c.id = m.contact_id
          join sequences q on q.id = m.sequence_id
          left join sender_profiles p on p.id = c.sender_profile_id
          left join sequence_senders ss on ss.sequence_id = m.sequence_id and ss.sender_profile_id = c.sender_profile_id
          where m.id = ${sendId}
          for update of m, c`;
        if (!s) return { outcome: 'not_sendable' as const, reason: 'gone' };
        if (s.status === 'sent') return { outcome: 'already_sent' as const, reason: null };
        if (s.status === 'sending') {
          // An earlier attempt claimed it and may have delivered it: count it sent, never resend.
          await tx`update sequence_sends set status = 'sent', unconfirmed = true, sent_at = now(), updated_at = now() where id = ${sendId} and status = 'sending'`;
          await tx`update sequence_contacts set last_reached_at = now() where id = ${s.contact_id}`;
          return { outcome: 'unconfirmed' as const, reason: null };
        }
        if (s.status !== 'approved') return { outcome: 'not_sendable' as const, reason: s.status };
        if (s.contact_status !== 'active' || s.sequence_status !== 'active') return { outcome: 'not_sendable' as const, reason: `contact ${s.contact_status}, sequence ${s.sequence_status}` };
        // The last moment: reply, bounce, stop, do-not-contact, cooldown or another live sequence.
        // Checked in the statement that claims the send, so both read one snapshot: a reply
        // recorded between a separate check and the claim would otherwise go unseen.
        const who = { email: s.email, profile_url: s.profile_url, sequence_id: s.sequence_id, contact_id: s.contact_id, since: s.enrolled_at };
        const [{ block } = { block: null }] = await tx<{ block: string | null }[]>`
          with b as (${outreachBlocksQuery(tx, s.workspace_id, s.sequence_id, [who], false)}), claim as (
            update sequence_sends set status = 'sending', updated_at = now()
            where id = ${sendId} and status = 'approved' and (select reason from b) is null
          )
          select (select reason from b) as block`;
        if (block) {
          await tx`update sequence_sends set status = 'stopped', reason = ${block}, updated_at = now() where id = ${sendId}`;
          // Cooldown and other sequences are not stop reasons of 014: the contact stops here.
          await tx`update sequence_contacts set status = 'stopped', stop_reason = ${block}, wait_reason = null, wait_until = null, finished_at = now(),
                     revision = revision + 1, updated_at = now() where id = ${s.contact_id} and status in ('active', 'paused', 'failed')`;
          return { outcome: 'stopped' as const, reason: block };
        }
        return { outcome: 'claimed' as const, send: s };
      });
      if (claimed.outcome !== 'claimed') return { outcome: claimed.outcome, reason: claimed.reason };
      const s = claimed.send;
      try {
        await mailer.send({
          messageId: s.message_id,
          from: { name: s.from_name ?? s.sender_name, address: s.from_email ?? mailer.defaultFrom },
          to: s.to_email ?? s.email!,
          subject: s.subject ?? '',
          text: s.body,
          ...(deps.publicBaseUrl ? { html: htmlWithPixel(s.body, `${deps.publicBaseUrl.replace(/\/+$/, '')}/sequences/opens/${s.open_token}/`) } : {}),
        });
      } catch (error) {
        if (certainlyNotSent(error)) {
          await sql`update sequence_sends set status = 'approved', updated_at = now() where id = ${sendId} and status = 'sending'`;
        }
        throw error;
      }
      await sql.begin(async (tx) => {
        await tx`update sequence_sends set status = 'sent', sent_at = now(), updated_at = now() where id = ${sendId} and status = 'sending'`;
        await tx`update sequence_contacts set last_reached_at = now() where id = ${s.contact_id}`;
      });
      return { outcome: 'sent', reason: null };
    },
  };
}
export type MailerActivities = ReturnType<typeof createMailerActivities>;
