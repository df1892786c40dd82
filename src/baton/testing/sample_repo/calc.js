// A tiny calculator for baton's demo. It has a bug on purpose: the demo agent fixes it.
function add(a, b) {
  return a - b;
}

function multiply(a, b) {
  return a * b;
}

module.exports = { add, multiply };
