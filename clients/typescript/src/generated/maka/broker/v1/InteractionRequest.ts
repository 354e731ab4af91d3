// Original file: proto/maka/broker/v1/broker.proto

import type { Form as _maka_form_v1_Form, Form__Output as _maka_form_v1_Form__Output } from '../../../maka/form/v1/Form';
import type { Round as _maka_interaction_v1_Round, Round__Output as _maka_interaction_v1_Round__Output } from '../../../maka/interaction/v1/Round';

export interface InteractionRequest {
  'invocation_id'?: (string);
  'correlation_id'?: (string);
  'form'?: (_maka_form_v1_Form | null);
  'round'?: (_maka_interaction_v1_Round | null);
}

export interface InteractionRequest__Output {
  'invocation_id': (string);
  'correlation_id': (string);
  'form': (_maka_form_v1_Form__Output | null);
  'round': (_maka_interaction_v1_Round__Output | null);
}
