// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Answer as _maka_form_v1_Answer, Answer__Output as _maka_form_v1_Answer__Output } from '../../../maka/form/v1/Answer';

export interface AnswerRequest {
  'interaction_id'?: (string);
  'session_id'?: (string);
  'submission_id'?: (string);
  'answer'?: (_maka_form_v1_Answer | null);
  'host_id'?: (string);
  'surface_kind'?: (string);
}

export interface AnswerRequest__Output {
  'interaction_id': (string);
  'session_id': (string);
  'submission_id': (string);
  'answer': (_maka_form_v1_Answer__Output | null);
  'host_id': (string);
  'surface_kind': (string);
}
