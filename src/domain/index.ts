// The pure reconcile core. Safe to import from workflow code: no I/O, no clock, no Node built-ins.
export * from './canonical';
export * from './duration';
export * from './schemas';
export * from './rootPath';
export * from './errors';
export * from './desired';
export * from './history';
export * from './classify';
export * from './plan';
export * from './conditions';
export * from './decide';
export * from './signals';
export * from './loop';
export * from './pass';
export * from './targets';
export * from './decisions';
export * from './redact';
