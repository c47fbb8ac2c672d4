'use strict';
// `npm run test:quick`: the inner loop, the tier test/helpers/quick.js
// defines.  The variable tells test/helpers/needs.js, here and in every
// process the tests start.
process.env.CUSTOMLABELS_TEST_QUICK = '1';
const { files } = require('./test/helpers/quick');

module.exports = { ...require('./.mocharc.json'), ignore: Object.keys(files) };
