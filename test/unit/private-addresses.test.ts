/**
 * The page reader's address rule, which webhooks, CSV imports, the assistant's endpoint calls and
 * client metadata share: private, loopback, link-local and reserved ranges are refused at and
 * inside their bounds, in IPv4, IPv6 and IPv4-mapped forms; the addresses just past them are not.
 */
import { describe, expect, it } from 'vitest';
import { isPrivateAddress } from '../../integrations/web/web-page.js';

describe('isPrivateAddress', () => {
  it('refuses each private range at its bounds, and in its IPv4-mapped forms', () => {
    for (const address of [
      '0.0.0.0',
      '10.0.0.0',
      '10.255.255.255',
      '127.0.0.1',
      '127.255.255.255',
      '169.254.0.0',
      '169.254.169.254',
      '172.16.0.0',
      '172.31.255.255',
      '192.168.0.0',
      '192.168.255.255',
      '100.64.0.0',
      '::',
      '::1',
      'fc00::',
      'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
      'not an address',
    ])
      expect(isPrivateAddress(address), address).toBe(true);
  });

  it('lets through public addresses, just past each range and IPv4-mapped', () => {
    for (const address of [
      '1.1.1.1',
      '8.8.8.8',
      '9.255.255.255',
      '11.0.0.0',
      '126.255.255.255',
      '128.0.0.0',
      '169.253.255.255',
      '169.255.0.0',
      '172.15.255.255',
      '172.32.0.0',
      '192.167.255.255',
      '192.169.0.0',
      '2606:4700::1111',
      'fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
      'fe00::',
      '::ffff:8.8.8.8',
      '::ffff:808:808',
    ])
      expect(isPrivateAddress(address), address).toBe(false);
  });
});
