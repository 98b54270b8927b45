export { main } from './cli';
