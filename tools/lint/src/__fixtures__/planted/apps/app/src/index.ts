import { model } from '@fx/model';
import { helper } from '../../../libs/wire/src/index';
export type Model = typeof model;
export const h = helper;
