import CairnIndex
import FoundationEssentials
import Testing

@Suite struct LexicalQueryTests {
    @Test func givenQuerySyntaxInUserText_whenBuildingTheMatchExpression_thenOnlyQuotedWordTokensRemain() {
        let expression = LexicalQuery.matchExpression(for: "the \"Flood\" AND NEAR(water*) -col:x ^y")

        #expect(expression == #""flood" OR "near" OR "water" OR "col" OR "x" OR "y""#)
    }

    @Test func givenOnlyStopWords_whenBuildingTheMatchExpression_thenTheyAreKept() {
        #expect(LexicalQuery.matchExpression(for: "What is the") == #""what" OR "is" OR "the""#)
    }

    @Test(arguments: ["", "   \n\t", "🌊🔥", "\"\"", "*", "-", "()", "^:"])
    func givenNoWordCharacters_whenBuildingTheMatchExpression_thenThereIsNone(text: String) {
        #expect(LexicalQuery.matchExpression(for: text) == nil)
    }

    @Test func givenRepeatedWordsAndScripts_whenTokenizing_thenTokensAreLowercasedUniqueAndKeepLetters() {
        #expect(LexicalQuery.tokens("Café CAFÉ 避難所 ماء x2") == ["café", "避難所", "ماء", "x2"])
    }

    @Test func givenManyWords_whenBuildingTheMatchExpression_thenTheTokenCountIsCapped() {
        let text = (1...100).map { "word\($0)" }.joined(separator: " ")

        let expression = LexicalQuery.matchExpression(for: text, maximumTokens: 5)

        #expect(expression?.components(separatedBy: " OR ").count == 5)
    }
}
