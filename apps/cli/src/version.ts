/** Triad's version, from the CLI package (the image and every service report the same). */
export const TRIAD_VERSION: string = (require('../package.json') as { version: string }).version;
