package engine

// HandleDelivery is handleDelivery for the external tests' rigs, which
// receive and handle messages one at a time as a worker does.
var HandleDelivery = handleDelivery
