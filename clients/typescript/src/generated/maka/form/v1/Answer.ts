// Original file: proto/maka/form/v1/form.proto

import type { Action as _maka_form_v1_Action, Action__Output as _maka_form_v1_Action__Output } from '../../../maka/form/v1/Action';
import type { Value as _maka_form_v1_Value, Value__Output as _maka_form_v1_Value__Output } from '../../../maka/form/v1/Value';

export interface Answer {
  'action'?: (_maka_form_v1_Action);
  'values'?: ({[key: string]: _maka_form_v1_Value});
}

export interface Answer__Output {
  'action': (_maka_form_v1_Action__Output);
  'values': ({[key: string]: _maka_form_v1_Value__Output});
}
