// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { EpochBegun as _maka_interaction_v1_EpochBegun, EpochBegun__Output as _maka_interaction_v1_EpochBegun__Output } from '../../../maka/interaction/v1/EpochBegun';
import type { InteractionOpened as _maka_interaction_v1_InteractionOpened, InteractionOpened__Output as _maka_interaction_v1_InteractionOpened__Output } from '../../../maka/interaction/v1/InteractionOpened';
import type { OpenRejected as _maka_interaction_v1_OpenRejected, OpenRejected__Output as _maka_interaction_v1_OpenRejected__Output } from '../../../maka/interaction/v1/OpenRejected';
import type { InteractionClosed as _maka_interaction_v1_InteractionClosed, InteractionClosed__Output as _maka_interaction_v1_InteractionClosed__Output } from '../../../maka/interaction/v1/InteractionClosed';
import type { InteractionSettled as _maka_interaction_v1_InteractionSettled, InteractionSettled__Output as _maka_interaction_v1_InteractionSettled__Output } from '../../../maka/interaction/v1/InteractionSettled';
import type { HeartbeatAck as _maka_interaction_v1_HeartbeatAck, HeartbeatAck__Output as _maka_interaction_v1_HeartbeatAck__Output } from '../../../maka/interaction/v1/HeartbeatAck';
import type { DeliveryRecorded as _maka_interaction_v1_DeliveryRecorded, DeliveryRecorded__Output as _maka_interaction_v1_DeliveryRecorded__Output } from '../../../maka/interaction/v1/DeliveryRecorded';

export interface HostLinkResponse {
  'epoch'?: (_maka_interaction_v1_EpochBegun | null);
  'opened'?: (_maka_interaction_v1_InteractionOpened | null);
  'open_rejected'?: (_maka_interaction_v1_OpenRejected | null);
  'closed'?: (_maka_interaction_v1_InteractionClosed | null);
  'settled'?: (_maka_interaction_v1_InteractionSettled | null);
  'heartbeat_ack'?: (_maka_interaction_v1_HeartbeatAck | null);
  'delivery_recorded'?: (_maka_interaction_v1_DeliveryRecorded | null);
  'frame'?: "epoch"|"opened"|"open_rejected"|"closed"|"settled"|"heartbeat_ack"|"delivery_recorded";
}

export interface HostLinkResponse__Output {
  'epoch'?: (_maka_interaction_v1_EpochBegun__Output | null);
  'opened'?: (_maka_interaction_v1_InteractionOpened__Output | null);
  'open_rejected'?: (_maka_interaction_v1_OpenRejected__Output | null);
  'closed'?: (_maka_interaction_v1_InteractionClosed__Output | null);
  'settled'?: (_maka_interaction_v1_InteractionSettled__Output | null);
  'heartbeat_ack'?: (_maka_interaction_v1_HeartbeatAck__Output | null);
  'delivery_recorded'?: (_maka_interaction_v1_DeliveryRecorded__Output | null);
  'frame'?: "epoch"|"opened"|"open_rejected"|"closed"|"settled"|"heartbeat_ack"|"delivery_recorded";
}
