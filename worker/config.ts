/**
 * Environment of the service, read once. Every setting has an embedded default. The reading lives
 * in integrations/config.ts, the one reader of process.env (decision 032); `readConfig` keeps its name here.
 */
export { readServiceConfig as readConfig, type ServiceConfig } from '../integrations/config.js';
