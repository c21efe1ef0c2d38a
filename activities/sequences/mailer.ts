/**
 * Email out of sequences and inbox replies: a small `Mailer` interface, its SMTP transport (nodemailer, from
 * `SMTP_URL`), and the sending activity. The receiving server dedupes nothing, so "never twice"
 * is ours: the send is claimed in Postgres (approved -> sending) in the same transaction that reads
 * contact_stop_reason(), and only a claimed send reaches SMTP. A retry that finds the claim
 * already taken never sends again: the first attempt may have been delivered.
 */
import type { Sql } from '../../db/sql.js';
import { markReached } from '../../store/sequences/contact-moves.js';
import {
  claimSend,
  lockSendForClaim,
  markSendSent,
  markSendUnconfirmed,
  releaseSendClaim,
  stopContactAtSend,
  stopSend,
} from '../../store/sequences/sends.js';
import { Mailer, certainlyNotSent, htmlWithPixel } from '../../integrations/mailer.js';

export type SendOutcome = 'sent' | 'already_sent' | 'unconfirmed' | 'stopped' | 'not_sendable' | 'no_mailer';

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
        const s = await lockSendForClaim(tx, sendId);
        if (!s) return { outcome: 'not_sendable' as const, reason: 'gone' };
        if (s.status === 'sent') return { outcome: 'already_sent' as const, reason: null };
        if (s.status === 'sending') {
          // An earlier attempt claimed it and may have delivered it: count it sent, never resend.
          await markSendUnconfirmed(tx, sendId);
          await markReached(tx, s.contact_id);
          return { outcome: 'unconfirmed' as const, reason: null };
        }
        if (s.status !== 'approved') return { outcome: 'not_sendable' as const, reason: s.status };
        if (s.contact_status !== 'active' || s.sequence_status !== 'active')
          return {
            outcome: 'not_sendable' as const,
            reason: `contact ${s.contact_status}, sequence ${s.sequence_status}`,
          };
        // The last moment: reply, bounce, stop, do-not-contact, cooldown or another live sequence.
        // Checked in the statement that claims the send, so both read one snapshot: a reply
        // recorded between a separate check and the claim would otherwise go unseen.
        const block = await claimSend(tx, sendId, s);
        if (block) {
          await stopSend(tx, sendId, block);
          // Cooldown and other sequences are not stop reasons of 014: the contact stops here.
          await stopContactAtSend(tx, s.contact_id, block);
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
          ...(deps.publicBaseUrl
            ? {
                html: htmlWithPixel(
                  s.body,
                  `${deps.publicBaseUrl.replace(/\/+$/, '')}/sequences/opens/${s.open_token}/`,
                ),
              }
            : {}),
        });
      } catch (error) {
        if (certainlyNotSent(error)) {
          await releaseSendClaim(sql, sendId);
        }
        throw error;
      }
      await sql.begin(async (tx) => {
        await markSendSent(tx, sendId);
        await markReached(tx, s.contact_id);
      });
      return { outcome: 'sent', reason: null };
    },
  };
}
export type MailerActivities = ReturnType<typeof createMailerActivities>;
