/**
 * The selector and pacing config the extension runs with. A change to either bumps
 * `configVersion`, and every check-in tells a browser on another version to fetch it again.
 */
import { maxPollAfterSeconds } from './pacing.js';
import { claimLeaseSeconds } from './timing.js';
import { configVersion, leaseSeconds } from './agent.js';
import type { AgentConfig } from './running.js';

export const agentConfig: AgentConfig = {
  config_version: configVersion,
  selectors: {
    'profile.top_card': 'section.pv-top-card, main section:first-of-type',
    'profile.more_menu': 'button[aria-label="More actions"]',
    'profile.connect': 'button[aria-label^="Invite"][aria-label$="to connect"]',
    'profile.follow': 'button[aria-label^="Follow"]',
    'profile.message': 'a[href*="/messaging/compose"], button[aria-label^="Message"]',
    'profile.pending': 'button[aria-label^="Pending"]',
    'invite.add_note': 'button[aria-label="Add a note"]',
    'invite.note_field': 'textarea[name="message"]',
    'invite.send': 'button[aria-label="Send invitation"], button[aria-label="Send now"]',
    'messaging.compose_body': 'div.msg-form__contenteditable[contenteditable="true"]',
    'messaging.send': 'button.msg-form__send-button',
    'messaging.thread_list': 'ul.msg-conversations-container__conversations-list',
    'connections.list': 'ul.mn-connection-card__list, div.scaffold-finite-scroll__content ul',
    'invitations.sent_list': 'section.mn-invitation-manager ul',
    'feed.latest_post_like': 'button[aria-label^="React Like"]',
    'checkpoint.marker': 'form#captcha-internal, main.challenge',
  },
  pacing: {
    lease_seconds: leaseSeconds,
    claim_lease_seconds: claimLeaseSeconds,
    max_poll_after_seconds: maxPollAfterSeconds,
    typing_ms_per_char: { min: 60, max: 180 },
    page_settle_ms: { min: 1500, max: 4000 },
  },
};
