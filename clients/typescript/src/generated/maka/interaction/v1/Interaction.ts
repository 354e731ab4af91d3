// Original file: proto/maka/interaction/v1/interaction.proto

import type { Binding as _maka_interaction_v1_Binding, Binding__Output as _maka_interaction_v1_Binding__Output } from '../../../maka/interaction/v1/Binding';
import type { InteractionState as _maka_interaction_v1_InteractionState, InteractionState__Output as _maka_interaction_v1_InteractionState__Output } from '../../../maka/interaction/v1/InteractionState';
import type { Form as _maka_form_v1_Form, Form__Output as _maka_form_v1_Form__Output } from '../../../maka/form/v1/Form';
import type { Answer as _maka_form_v1_Answer, Answer__Output as _maka_form_v1_Answer__Output } from '../../../maka/form/v1/Answer';
import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';
import type { DeliveryState as _maka_interaction_v1_DeliveryState, DeliveryState__Output as _maka_interaction_v1_DeliveryState__Output } from '../../../maka/interaction/v1/DeliveryState';
import type { AnsweredBy as _maka_interaction_v1_AnsweredBy, AnsweredBy__Output as _maka_interaction_v1_AnsweredBy__Output } from '../../../maka/interaction/v1/AnsweredBy';
import type { Round as _maka_interaction_v1_Round, Round__Output as _maka_interaction_v1_Round__Output } from '../../../maka/interaction/v1/Round';
import type { Long } from '@grpc/proto-loader';

export interface Interaction {
  'interaction_id'?: (string);
  'binding'?: (_maka_interaction_v1_Binding | null);
  'host_epoch'?: (number | string | Long);
  'state'?: (_maka_interaction_v1_InteractionState);
  'form'?: (_maka_form_v1_Form | null);
  'answer'?: (_maka_form_v1_Answer | null);
  'close_reason'?: (_maka_interaction_v1_CloseReason);
  'created_at'?: (_google_protobuf_Timestamp | null);
  'expires_at'?: (_google_protobuf_Timestamp | null);
  'settled_at'?: (_google_protobuf_Timestamp | null);
  'delivery'?: (_maka_interaction_v1_DeliveryState);
  'delivery_lost_reason'?: (_maka_interaction_v1_CloseReason);
  'delivery_recorded_at'?: (_google_protobuf_Timestamp | null);
  'answered_by'?: (_maka_interaction_v1_AnsweredBy | null);
  'round'?: (_maka_interaction_v1_Round | null);
  'sealed_answer'?: (Buffer | Uint8Array | string);
}

export interface Interaction__Output {
  'interaction_id': (string);
  'binding': (_maka_interaction_v1_Binding__Output | null);
  'host_epoch': (string);
  'state': (_maka_interaction_v1_InteractionState__Output);
  'form': (_maka_form_v1_Form__Output | null);
  'answer': (_maka_form_v1_Answer__Output | null);
  'close_reason': (_maka_interaction_v1_CloseReason__Output);
  'created_at': (_google_protobuf_Timestamp__Output | null);
  'expires_at': (_google_protobuf_Timestamp__Output | null);
  'settled_at': (_google_protobuf_Timestamp__Output | null);
  'delivery': (_maka_interaction_v1_DeliveryState__Output);
  'delivery_lost_reason': (_maka_interaction_v1_CloseReason__Output);
  'delivery_recorded_at': (_google_protobuf_Timestamp__Output | null);
  'answered_by': (_maka_interaction_v1_AnsweredBy__Output | null);
  'round': (_maka_interaction_v1_Round__Output | null);
  'sealed_answer': (Buffer);
}
