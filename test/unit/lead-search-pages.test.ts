/** The pure rules of a lead search's pages (domain/sourcing/lead-search.ts, run by services/sourcing/lead-search.ts). */
import { describe, expect, it } from 'vitest';
import { isLastLeadPage, rateLimitWaitSeconds } from '../../domain/sourcing/lead-search.js';

describe('rateLimitWaitSeconds', () => {
  it('waits what the provider asked, 30 s when it asked nothing', () => {
    expect(rateLimitWaitSeconds(12)).toBe(12);
    expect(rateLimitWaitSeconds(null)).toBe(30);
  });

  it('waits at least 1 s and at most an hour', () => {
    expect(rateLimitWaitSeconds(0)).toBe(1);
    expect(rateLimitWaitSeconds(-5)).toBe(1);
    expect(rateLimitWaitSeconds(86_400)).toBe(3600);
  });
});

describe('isLastLeadPage', () => {
  it('is the last page when it came back empty or short', () => {
    expect(isLastLeadPage(1, { resultsOnPage: 0, perPage: 25, totalPages: 10 })).toBe(true);
    expect(isLastLeadPage(1, { resultsOnPage: 24, perPage: 25, totalPages: 10 })).toBe(true);
  });

  it('is the last page at or past the provider’s page count', () => {
    expect(isLastLeadPage(10, { resultsOnPage: 25, perPage: 25, totalPages: 10 })).toBe(true);
    expect(isLastLeadPage(11, { resultsOnPage: 25, perPage: 25, totalPages: 10 })).toBe(true);
  });

  it('reads on after a full page before the last', () => {
    expect(isLastLeadPage(9, { resultsOnPage: 25, perPage: 25, totalPages: 10 })).toBe(false);
  });
});
