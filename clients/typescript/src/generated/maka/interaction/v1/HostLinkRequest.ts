// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Hello as _maka_interaction_v1_Hello, Hello__Output as _maka_interaction_v1_Hello__Output } from '../../../maka/interaction/v1/Hello';
import type { OpenInteraction as _maka_interaction_v1_OpenInteraction, OpenInteraction__Output as _maka_interaction_v1_OpenInteraction__Output } from '../../../maka/interaction/v1/OpenInteraction';
import type { CloseInteraction as _maka_interaction_v1_CloseInteraction, CloseInteraction__Output as _maka_interaction_v1_CloseInteraction__Output } from '../../../maka/interaction/v1/CloseInteraction';
import type { Heartbeat as _maka_interaction_v1_Heartbeat, Heartbeat__Output as _maka_interaction_v1_Heartbeat__Output } from '../../../maka/interaction/v1/Heartbeat';
import type { ReportDelivery as _maka_interaction_v1_ReportDelivery, ReportDelivery__Output as _maka_interaction_v1_ReportDelivery__Output } from '../../../maka/interaction/v1/ReportDelivery';

export interface HostLinkRequest {
  'hello'?: (_maka_interaction_v1_Hello | null);
  'open'?: (_maka_interaction_v1_OpenInteraction | null);
  'close'?: (_maka_interaction_v1_CloseInteraction | null);
  'heartbeat'?: (_maka_interaction_v1_Heartbeat | null);
  'delivery'?: (_maka_interaction_v1_ReportDelivery | null);
  'frame'?: "hello"|"open"|"close"|"heartbeat"|"delivery";
}

export interface HostLinkRequest__Output {
  'hello'?: (_maka_interaction_v1_Hello__Output | null);
  'open'?: (_maka_interaction_v1_OpenInteraction__Output | null);
  'close'?: (_maka_interaction_v1_CloseInteraction__Output | null);
  'heartbeat'?: (_maka_interaction_v1_Heartbeat__Output | null);
  'delivery'?: (_maka_interaction_v1_ReportDelivery__Output | null);
  'frame'?: "hello"|"open"|"close"|"heartbeat"|"delivery";
}
