// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface Heartbeat {
}

export interface Heartbeat__Output {
}
