// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Requester as _maka_form_v1_Requester, Requester__Output as _maka_form_v1_Requester__Output } from '../../../maka/form/v1/Requester';
import type { InteractionState as _maka_interaction_v1_InteractionState, InteractionState__Output as _maka_interaction_v1_InteractionState__Output } from '../../../maka/interaction/v1/InteractionState';
import type { Action as _maka_form_v1_Action, Action__Output as _maka_form_v1_Action__Output } from '../../../maka/form/v1/Action';
import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';
import type { AnsweredBy as _maka_interaction_v1_AnsweredBy, AnsweredBy__Output as _maka_interaction_v1_AnsweredBy__Output } from '../../../maka/interaction/v1/AnsweredBy';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';
import type { DeliveryState as _maka_interaction_v1_DeliveryState, DeliveryState__Output as _maka_interaction_v1_DeliveryState__Output } from '../../../maka/interaction/v1/DeliveryState';
import type { Person as _maka_interaction_v1_Person, Person__Output as _maka_interaction_v1_Person__Output } from '../../../maka/interaction/v1/Person';
import type { Long } from '@grpc/proto-loader';

export interface HistoryEntry {
  'interaction_id'?: (string);
  'host_id'?: (string);
  'host_epoch'?: (number | string | Long);
  'session_id'?: (string);
  'turn_id'?: (string);
  'invocation_id'?: (string);
  'tool_name'?: (string);
  'requester'?: (_maka_form_v1_Requester | null);
  'state'?: (_maka_interaction_v1_InteractionState);
  'action'?: (_maka_form_v1_Action);
  'close_reason'?: (_maka_interaction_v1_CloseReason);
  'answered_by'?: (_maka_interaction_v1_AnsweredBy | null);
  'created_at'?: (_google_protobuf_Timestamp | null);
  'settled_at'?: (_google_protobuf_Timestamp | null);
  'delivery'?: (_maka_interaction_v1_DeliveryState);
  'delivery_lost_reason'?: (_maka_interaction_v1_CloseReason);
  'delivery_recorded_at'?: (_google_protobuf_Timestamp | null);
  'made_for'?: (_maka_interaction_v1_Person | null);
}

export interface HistoryEntry__Output {
  'interaction_id': (string);
  'host_id': (string);
  'host_epoch': (string);
  'session_id': (string);
  'turn_id': (string);
  'invocation_id': (string);
  'tool_name': (string);
  'requester': (_maka_form_v1_Requester__Output | null);
  'state': (_maka_interaction_v1_InteractionState__Output);
  'action': (_maka_form_v1_Action__Output);
  'close_reason': (_maka_interaction_v1_CloseReason__Output);
  'answered_by': (_maka_interaction_v1_AnsweredBy__Output | null);
  'created_at': (_google_protobuf_Timestamp__Output | null);
  'settled_at': (_google_protobuf_Timestamp__Output | null);
  'delivery': (_maka_interaction_v1_DeliveryState__Output);
  'delivery_lost_reason': (_maka_interaction_v1_CloseReason__Output);
  'delivery_recorded_at': (_google_protobuf_Timestamp__Output | null);
  'made_for': (_maka_interaction_v1_Person__Output | null);
}
