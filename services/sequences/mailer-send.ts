/**
 * A sequence email's send (the contact workflow's activity, activities/sequences/mailer.ts, hands
 * it here). The receiving server dedupes nothing, so "never twice" is ours
 * (docs/decisions/016-email-at-most-once.md): the send is claimed in Postgres (approved -> sending)
 * in the same transaction that reads contact_stop_reason(), and only a claimed send reaches SMTP. A
 * retry that finds the claim already taken never sends again: the first attempt may have been
 * delivered.
 */
import type { Mailer } from '../../integrations/mailer.js';
import { certainlyNotSent, htmlWithPixel } from '../../integrations/mailer.js';
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
import type { ServiceDeps } from '../deps.js';

export type SendOutcome = 'sent' | 'already_sent' | 'unconfirmed' | 'stopped' | 'not_sendable' | 'no_mailer';

/** The mailer (null: no SMTP, the email waits and says so) and the API's public address for the open-tracking pixel (none without it). */
export type SendDeps = Pick<ServiceDeps, 'sql'> & { mailer: Mailer | null; publicBaseUrl?: string | undefined };

/** Claims the send, sends it, and records it sent with its contact reached; or answers why it was not sent. */
export async function sendSequenceEmail(
  { sql, mailer, publicBaseUrl }: SendDeps,
  { sendId }: { sendId: string },
): Promise<{ outcome: SendOutcome; reason: string | null }> {
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
    // recorded between a separate check and the claim would otherwise go unseen
    // (docs/decisions/015-one-snapshot-send-claim.md).
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
      ...(publicBaseUrl
        ? { html: htmlWithPixel(s.body, `${publicBaseUrl.replace(/\/+$/, '')}/sequences/opens/${s.open_token}/`) }
        : {}),
    });
  } catch (error) {
    // Only a send the server certainly refused gives its claim back, to be sent again.
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
}
