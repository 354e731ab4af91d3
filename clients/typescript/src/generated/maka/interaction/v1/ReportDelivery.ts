// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { DeliveryState as _maka_interaction_v1_DeliveryState, DeliveryState__Output as _maka_interaction_v1_DeliveryState__Output } from '../../../maka/interaction/v1/DeliveryState';
import type { CloseReason as _maka_interaction_v1_CloseReason, CloseReason__Output as _maka_interaction_v1_CloseReason__Output } from '../../../maka/interaction/v1/CloseReason';

export interface ReportDelivery {
  'interaction_id'?: (string);
  'delivery'?: (_maka_interaction_v1_DeliveryState);
  'lost_reason'?: (_maka_interaction_v1_CloseReason);
}

export interface ReportDelivery__Output {
  'interaction_id': (string);
  'delivery': (_maka_interaction_v1_DeliveryState__Output);
  'lost_reason': (_maka_interaction_v1_CloseReason__Output);
}
