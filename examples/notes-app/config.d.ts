// The server this app talks to: config.js, written by setup.mjs.
export declare const server: string;
