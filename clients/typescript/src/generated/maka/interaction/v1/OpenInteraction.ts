// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Binding as _maka_interaction_v1_Binding, Binding__Output as _maka_interaction_v1_Binding__Output } from '../../../maka/interaction/v1/Binding';
import type { Form as _maka_form_v1_Form, Form__Output as _maka_form_v1_Form__Output } from '../../../maka/form/v1/Form';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../../google/protobuf/Duration';
import type { Round as _maka_interaction_v1_Round, Round__Output as _maka_interaction_v1_Round__Output } from '../../../maka/interaction/v1/Round';

export interface OpenInteraction {
  'request_ref'?: (string);
  'binding'?: (_maka_interaction_v1_Binding | null);
  'form'?: (_maka_form_v1_Form | null);
  'wait'?: (_google_protobuf_Duration | null);
  'replay'?: (boolean);
  'round'?: (_maka_interaction_v1_Round | null);
}

export interface OpenInteraction__Output {
  'request_ref': (string);
  'binding': (_maka_interaction_v1_Binding__Output | null);
  'form': (_maka_form_v1_Form__Output | null);
  'wait': (_google_protobuf_Duration__Output | null);
  'replay': (boolean);
  'round': (_maka_interaction_v1_Round__Output | null);
}
