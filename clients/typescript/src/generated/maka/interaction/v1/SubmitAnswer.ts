// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Answer as _maka_form_v1_Answer, Answer__Output as _maka_form_v1_Answer__Output } from '../../../maka/form/v1/Answer';

export interface SubmitAnswer {
  'submission_id'?: (string);
  'interaction_id'?: (string);
  'answer'?: (_maka_form_v1_Answer | null);
}

export interface SubmitAnswer__Output {
  'submission_id': (string);
  'interaction_id': (string);
  'answer': (_maka_form_v1_Answer__Output | null);
}
