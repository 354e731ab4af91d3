// Original file: proto/maka/broker/v1/broker.proto


export interface CallStopped {
}

export interface CallStopped__Output {
}
